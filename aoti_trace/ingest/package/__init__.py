"""``.pt2`` packages into frames: the archive reader (bounded, hostile-safe), the AOTI wrapper, the package facts."""
