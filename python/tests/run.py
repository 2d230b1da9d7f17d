"""Runs the Python suite and ends with the plain 'N passed, N failed' line CI reads."""
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
suite = unittest.defaultTestLoader.discover(here, top_level_dir=here)
r = unittest.TextTestRunner(verbosity=2).run(suite)
bad = len(r.failures) + len(r.errors)
print("smartt-python: %d passed, %d failed" % (r.testsRun - bad, bad))
sys.exit(1 if bad else 0)
