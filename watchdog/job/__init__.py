"""The job side: the coordinator and what it reports while the job runs."""
