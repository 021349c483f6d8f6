"""The cluster page and `manage.py cluster status`."""

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from jobs import cluster
from jobs.cluster import cluster_status
from jobs.engine import leases
from jobs.engine.leadership import record_leadership
from jobs.models import Run
from tests.factories import make_job
from tests.fixtures.core import T0

TTL = leases.lease_ttl()


@pytest.fixture
def two_nodes(db):
    now = timezone.now()
    for worker, pid in (("sched-1", 101), ("sched-2", 202)):
        leases.acquire(
            cluster.node_lease_name(worker),
            worker,
            now=now,
            info={"host": f"host-{pid}", "pid": pid, "version": "1.2"},
        )
    grant = leases.acquire(cluster.LEADER, "sched-2", now=now)
    record_leadership(grant, "sched-2")
    job = make_job()
    Run.objects.create(
        job=job,
        scheduled_at=now,
        trigger=Run.Trigger.SCHEDULE,
        status=Run.Status.RUNNING,
        worker_id="sched-1",
    )
    return now


def test_the_cluster_page_needs_a_signed_in_user(client, db):
    response = client.get("/cluster/")
    assert response.status_code == 302
    assert "/login/" in response["Location"]


def test_any_signed_in_user_sees_nodes_leader_and_leadership_changes(viewer_client, two_nodes):
    response = viewer_client.get("/cluster/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "sched-1" in page and "host-101" in page and "101" in page and "1.2" in page
    assert "<strong>sched-2</strong> holds the lease (epoch 1)" in page
    assert "Recent leadership changes" in page
    assert "<td>1</td>" in page  # sched-1 has one run in flight


def test_htmx_refresh_gets_only_the_status_section(viewer_client, two_nodes):
    response = viewer_client.get("/cluster/", headers={"HX-Request": "true"})

    page = response.content.decode()
    assert page.lstrip().startswith('<div id="cluster-status"')
    assert "<html" not in page


def test_cluster_status_json_for_scripts(two_nodes):
    out = StringIO()
    call_command("cluster", "status", "--json", stdout=out)

    data = json.loads(out.getvalue())
    assert set(data) == {"leader", "lease_expires_at", "epoch", "nodes"}
    assert data["leader"] == "sched-2" and data["epoch"] == 1
    assert data["lease_expires_at"] == (two_nodes + leases.lease_ttl()).isoformat()
    assert [set(n) for n in data["nodes"]] == [
        {"worker_id", "host", "pid", "last_heartbeat", "running", "clock_skew_seconds", "clock_refused"}
    ] * 2
    assert [(n["worker_id"], n["pid"], n["running"]) for n in data["nodes"]] == [
        ("sched-1", 101, 1),
        ("sched-2", 202, 0),
    ]


def test_cluster_status_json_without_any_scheduler(db):
    out = StringIO()
    call_command("cluster", "status", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {
        "leader": None,
        "lease_expires_at": None,
        "epoch": None,
        "nodes": [],
    }


def test_cluster_status_text_says_who_leads_and_which_node_was_lost(two_nodes):
    leases.acquire(
        cluster.node_lease_name("sched-3"),
        "sched-3",
        now=two_nodes - timedelta(minutes=10),
        info={"host": "h3", "pid": 3},
    )
    out = StringIO()
    call_command("cluster", "status", stdout=out)

    text = out.getvalue()
    assert text.startswith("leader: sched-2 (epoch 1, lease until ")
    assert "nodes: 2 live" in text
    assert "sched-3" in text and "LOST" in text
    assert "epoch 1: sched-2" in text


def test_on_sqlite_the_one_running_scheduler_is_reported_as_leader(viewer_client, db):
    leases.acquire(cluster.node_lease_name("solo"), "solo", now=timezone.now(), info={"host": "h", "pid": 1})

    out = StringIO()
    call_command("cluster", "status", "--json", stdout=out)

    data = json.loads(out.getvalue())
    assert (data["leader"], data["epoch"], data["lease_expires_at"]) == ("solo", None, None)
    assert (
        "<strong>solo</strong> plans and runs everything" in viewer_client.get("/cluster/").content.decode()
    )


# -- the data the page shows (jobs.cluster) ---------------------------------------


def test_cluster_status_names_leader_and_live_nodes_with_the_documented_json_keys(db):
    leases.acquire(
        cluster.node_lease_name("n1"), "n1", now=T0, info={"host": "h1", "pid": 11, "version": "1.0"}
    )
    leases.acquire(
        cluster.node_lease_name("n2"), "n2", now=T0 - timedelta(minutes=5), info={"host": "h2", "pid": 22}
    )
    grant = leases.acquire("leader", "n1", now=T0)
    record_leadership(grant, "n1")

    status = cluster_status(now=T0 + timedelta(seconds=1))

    data = status.as_json()
    assert set(data) == {"leader", "lease_expires_at", "epoch", "nodes"}
    assert (data["leader"], data["epoch"], data["lease_expires_at"]) == ("n1", 1, (T0 + TTL).isoformat())
    assert data["nodes"] == [
        {
            "worker_id": "n1",
            "host": "h1",
            "pid": 11,
            "last_heartbeat": T0.isoformat(),
            "running": 0,
            "clock_skew_seconds": None,
            "clock_refused": False,
        }
    ]
    assert [(n.worker_id, n.alive) for n in status.nodes] == [("n1", True), ("n2", False)]
    assert [c.worker_id for c in status.changes] == ["n1"]


def test_cluster_status_has_no_leader_once_the_lease_lapsed(db):
    leases.acquire("leader", "n1", now=T0)
    status = cluster_status(now=T0 + TTL + timedelta(seconds=1))
    assert (status.leader, status.epoch, status.lease_expires_at, status.lapsed_holder) == (
        None,
        None,
        None,
        "n1",
    )


def test_a_scheduler_node_reports_cronboard_s_version_on_the_page(viewer_client, db):
    import jobs
    from jobs.engine.leadership import Leadership

    info = Leadership("versioned", clustered=False).node_info
    assert info["version"] == jobs.__version__ != ""
    leases.acquire(cluster.node_lease_name("versioned"), "versioned", now=timezone.now(), info=info)
    html = viewer_client.get("/cluster/").content.decode()
    assert f"<td>{jobs.__version__}</td>" in html
