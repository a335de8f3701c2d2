"""Where the job's events and figures go: event log, console, MQTT, metrics, reports, storage."""
