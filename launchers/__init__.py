"""One module per way of starting a job (torchrun, srun, a generic command, SageMaker)."""
