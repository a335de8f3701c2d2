"""neuron-watch: a watchdog for torchrun/srun jobs on Neuron (Trainium/Inferentia) and GPU clusters."""

__version__ = "0.1.0"
