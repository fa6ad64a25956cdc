"""The decision base's code a capability's README imports (`from executor.decider import
Answerer, Decider, question_of`): kept at this path so a bundle already downloaded still
runs. The model lives in `executor.models.decider`."""

from executor.models.decider import Answerer, Decider, load, question_of

__all__ = ["Answerer", "Decider", "load", "question_of"]
