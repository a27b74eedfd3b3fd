"""Operations on tensors, one family per module."""
