"""What both the domain (models, services, alerts, the cluster's read model)
and the engine need, below both: a run's log buffer and the cap of long
texts (`logbuffer`), the database's clock (`dbclock`), the wake-up channel
(`wakeup`), how a mail server's refusal reads (`mailfailures`), demo mode
(`demo`). Nothing here imports the rest of jobs/ (docs/architecture.md,
"Layers")."""
