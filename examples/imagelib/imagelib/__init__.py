"""imagelib: a small image library of someone's own, whose model, tensor type and training step perfsweep times."""
