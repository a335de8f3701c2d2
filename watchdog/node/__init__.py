"""A node's share of the job: the agent, its link, tails, the process table, evidence."""
