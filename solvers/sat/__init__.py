"""CaDiCaL (python-sat) as a race member: the CNF encoding (`encoding`) and the member in its
modes (`member`), each mode registered as a `complete` solver.
"""
