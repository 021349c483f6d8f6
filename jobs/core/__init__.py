"""What both the domain (models, services, alerts, the cluster's read model)
and the engine need, below both: the log cap, the database's clock, the
wake-up channel, how a mail server's refusal reads, demo mode. Nothing here
imports the rest of jobs/ (docs/architecture.md, "Layers")."""
