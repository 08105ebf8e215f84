"""Pieces shared by the algorithms: the consistency equations and the path replay."""
