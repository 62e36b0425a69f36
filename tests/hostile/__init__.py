"""Hostile inputs (issue 50): every case a careful but unlucky user met, kept as a regression test."""
