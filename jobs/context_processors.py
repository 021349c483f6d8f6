from django.conf import settings


def cronboard(request):
    """What every page needs to know about the deployment: demo mode shows a banner."""
    return {"demo_mode": bool(getattr(settings, "DEMO_MODE", False))}
