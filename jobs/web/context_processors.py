from jobs.core import demo


def cronboard(request):
    """What every page needs to know about the deployment: demo mode shows a banner."""
    return {"demo_mode": demo.is_on()}
