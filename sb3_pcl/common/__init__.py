"""Pieces that two or more algorithms share: the path replay, the recurrent policies, demonstrations, checks."""
