"""Copy an AOTI package with its model .so truncated to 1/16 of its size (a damaged package derived from a real one).

python3 tests/data/text/truncate_so.py IN.pt2 OUT.pt2
"""
import sys
import zipfile

src, dst = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
    for info in zin.infolist():
        data = zin.read(info)
        if info.filename.endswith(".wrapper.so"):
            data = data[: len(data) // 16]
        zout.writestr(info, data)
