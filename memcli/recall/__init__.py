"""Recall: four retrieval arms, fusion, rerank, boosts and a token budget."""

from memcli.recall.pipeline import RecallError, recall, validate
from memcli.recall.types import ARMS, RecallOptions, RecallResult

__all__ = ["ARMS", "RecallError", "RecallOptions", "RecallResult", "recall", "validate"]
