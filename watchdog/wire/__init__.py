"""The wire between the nodes and the coordinator: frames, signing keys, sockets."""
