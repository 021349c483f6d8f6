"""Leases with a fixed clock (SQLite: the caller's clock; on PostgreSQL the
same code judges by the database clock, see test_cluster_processes.py)."""

from datetime import timedelta

import pytest

from jobs import cluster
from jobs.engine import leases
from jobs.models import Lease
from tests.fixtures.core import T0

TTL = leases.lease_ttl()


@pytest.fixture(autouse=True)
def _db(db):
    pass


def test_first_take_starts_epoch_one_and_renewal_keeps_it():
    taken = leases.acquire("leader", "a", now=T0)
    assert (taken.epoch, taken.taken, taken.expires_at) == (1, True, T0 + TTL)
    renewed = leases.acquire("leader", "a", epoch=1, now=T0 + timedelta(seconds=10))
    assert (renewed.epoch, renewed.taken, renewed.expires_at) == (1, False, T0 + timedelta(seconds=10) + TTL)
    assert renewed.acquired_at == T0


def test_a_live_lease_of_another_holder_is_refused():
    leases.acquire("leader", "a", now=T0)
    assert leases.acquire("leader", "b", now=T0 + TTL) is None  # expires_at itself is still live
    assert Lease.objects.get(name="leader").holder == "a"


def test_an_expired_lease_is_taken_with_a_new_epoch():
    leases.acquire("leader", "a", now=T0)
    grant = leases.acquire("leader", "b", now=T0 + TTL + timedelta(seconds=1))
    assert (grant.epoch, grant.taken) == (2, True)
    assert leases.acquire("leader", "a", epoch=1, now=T0 + TTL + timedelta(seconds=2)) is None


def test_the_old_holder_retaking_its_own_lapsed_lease_gets_a_new_epoch():
    leases.acquire("leader", "a", now=T0)
    grant = leases.acquire("leader", "a", epoch=1, now=T0 + TTL + timedelta(seconds=1))
    assert (grant.epoch, grant.taken) == (2, True)


def test_a_new_process_under_the_same_worker_id_takes_over_and_fences_the_old_one():
    leases.acquire("leader", "a", now=T0)
    successor = leases.acquire("leader", "a", epoch=None, now=T0 + timedelta(seconds=5))
    assert (successor.epoch, successor.taken) == (2, True)
    # The old process (epoch 1) wakes up: it cannot renew, the successor can.
    assert leases.acquire("leader", "a", epoch=1, now=T0 + timedelta(seconds=6)) is None
    assert leases.acquire("leader", "a", epoch=2, now=T0 + timedelta(seconds=6)).epoch == 2


def test_held_is_true_only_for_the_holder_at_its_epoch_before_expiry():
    leases.acquire("leader", "a", now=T0)
    assert leases.holds("leader", "a", 1, now=T0 + timedelta(seconds=29))
    assert not leases.holds("leader", "a", 1, now=T0 + TTL)
    assert not leases.holds("leader", "a", 2, now=T0)
    assert not leases.holds("leader", "b", 1, now=T0)


def test_release_frees_the_lease_only_for_the_epoch_given():
    leases.acquire("leader", "a", now=T0)
    leases.release("leader", "a", epoch=7)
    assert Lease.objects.get(name="leader").holder == "a"
    leases.release("leader", "a", epoch=1)
    assert leases.acquire("leader", "b", now=T0 + timedelta(seconds=1)).epoch == 2


def test_live_node_holders_leave_out_expired_and_released_nodes():
    for worker in ("n1", "n2", "n3"):
        leases.acquire(cluster.node_lease_name(worker), worker, now=T0)
    leases.acquire(cluster.node_lease_name("n1"), "n1", epoch=1, now=T0 + timedelta(seconds=20))
    leases.release(cluster.node_lease_name("n3"), "n3")
    assert cluster.live_node_holders(now=T0 + timedelta(seconds=40)) == {"n1"}
