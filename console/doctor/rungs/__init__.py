"""The ladder's rungs, one module each; ``console.doctor.runner.RUNGS`` lists them in order."""
