"""What a rank's output and state mean: the knowledge base, the judge, the culprit (mostly pure)."""
