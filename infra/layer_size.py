"""Print the size of a built layer folder, unzipped and zipped (what Lambda limits: 250 MB unzipped)."""

from __future__ import annotations

import io
import os
import sys
import zipfile


def main(root: str) -> None:
    files = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, os.path.relpath(path, root))
    unzipped = sum(os.path.getsize(f) for f in files)
    print(
        f"{os.path.basename(root)}: {len(files)} files, {unzipped / 2**20:.1f} MiB unzipped, "
        f"{len(buffer.getvalue()) / 2**20:.1f} MiB zipped"
    )


if __name__ == "__main__":
    main(sys.argv[1])
