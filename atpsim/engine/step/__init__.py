"""The step level: a training step's program on every rank's compute and communication
streams (:mod:`scheduler`), with compute and collective times for one point (:mod:`run`)."""
