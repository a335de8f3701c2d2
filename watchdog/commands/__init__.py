"""One module per ``neuron-watch`` subcommand that is not a launcher."""
