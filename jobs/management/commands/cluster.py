"""python manage.py cluster status [--json]"""

import json

from django.core.management.base import BaseCommand
from django.utils import timezone

from jobs import checks
from jobs.cluster import ClusterStatus, cluster_status
from jobs.core.dbclock import describe, max_skew, refusal


class Command(BaseCommand):
    help = "Show the scheduler nodes, the leader lease and recent leadership changes."
    requires_system_checks = checks.FOR_COMMANDS

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True, metavar="status")
        status = actions.add_parser("status", help="the leader, its lease, and the live nodes")
        status.add_argument(
            "--json",
            action="store_true",
            dest="as_json",
            help="one JSON object: leader, lease_expires_at, epoch, nodes (worker_id, host, pid, last_heartbeat, "
            "running, clock_skew_seconds, clock_refused)",
        )

    def handle(self, *args, action, as_json=False, **options):
        checks.require_migrated()
        status = cluster_status(now=timezone.now())
        if as_json:
            self.stdout.write(json.dumps(status.as_json(), indent=2))
        else:
            self.stdout.write(_text(status))


def _text(status: ClusterStatus) -> str:
    lines = []
    if status.leader and status.epoch:
        lines.append(
            f"leader: {status.leader} (epoch {status.epoch}, lease until {status.lease_expires_at.isoformat()})"
        )
    elif status.leader:
        lines.append(f"leader: {status.leader} (SQLite is single-node: no lease)")
    elif status.lapsed_holder:
        lines.append(
            f"leader: none (the lease of {status.lapsed_holder} lapsed; a standby takes it at its next try)"
        )
    else:
        lines.append("leader: none")
    live = status.live_nodes
    lines.append(f"nodes: {len(live)} live")
    for node in status.nodes:
        heartbeat = node.last_heartbeat.isoformat() if node.last_heartbeat else "-"
        state = "leader" if node.is_leader else ("live" if node.alive else "LOST")
        clock = "-" if node.clock_skew is None else f"{node.clock_skew:+.3f}s"
        lines.append(
            f"  {node.worker_id:<20} {state:<6} host={node.host} pid={node.pid} version={node.version or '-'} "
            f"last_heartbeat={heartbeat} running={node.running} clock={clock}"
        )
        if node.alive and node.clock_refused:
            lines.append(f"    {refusal(node.clock_skew)}")
        elif node.alive and node.clock_over_limit:
            lines.append(
                f"    its clock is {describe(node.clock_skew)}, more than JOBS_MAX_CLOCK_SKEW ({max_skew():g} s)"
            )
    if status.changes:
        lines.append("recent leadership changes:")
        for change in status.changes:
            lines.append(
                f"  epoch {change.epoch}: {change.worker_id} on {change.host or '?'} at {change.acquired_at.isoformat()}"
            )
    return "\n".join(lines)
