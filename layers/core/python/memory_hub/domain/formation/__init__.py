"""Memory formation: L0 messages into L1 records (extracted, and consolidated with the records the
user already has), and — with an asset's ``formation: all`` — each user's scenes and persona.

- ``interface``: what the model is asked and how its answer is read (pure: no AWS).
- ``schedule``: what ``conversation/add`` queues, and the ``formation/status`` and ``formation/run``
  routes.
- ``run``: one run of one user's batch (the FormationFunction): read the batch again, ask the model,
  validate, store the answer, write, commit.
- ``apply``: an answer's entries written by the rules of ``atomic/add`` (idempotently: a replay
  writes nothing twice and never reinforces).
- ``files``: the user's formed scenes and persona.
"""
