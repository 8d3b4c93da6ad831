#!/usr/bin/env python3
"""Every relative link in README.md and docs/*.md resolves: the file exists,
and a #anchor names a heading of it (GitHub's slugs). Links to the web are
not fetched. Exits 1 and lists each broken link otherwise."""

import re
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose_lines(text):
    """The lines outside fenced code blocks, with their numbers."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading):
    """GitHub's anchor for a heading: its text, lower case, punctuation
    dropped, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").lower()
    kept = []
    for ch in text:
        if ch in " -_" or unicodedata.category(ch)[0] in "LN":
            kept.append("-" if ch == " " else ch)
    return "".join(kept)


def anchors(path):
    seen, result = {}, set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def main():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken, checked = [], 0
    for page in pages:
        for number, line in prose_lines(page.read_text(encoding="utf-8")):
            line = re.sub(r"`[^`]*`", "", line)  # inline code is not a link
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, …
                    continue
                checked += 1
                where = f"{page.relative_to(ROOT)}:{number}: {target}"
                file_part, _, anchor = target.partition("#")
                linked = (page.parent / file_part).resolve() if file_part else page
                name = linked.relative_to(ROOT).as_posix() if linked.is_relative_to(ROOT) else str(linked)
                if not linked.exists():
                    broken.append(f"{where}: no such file")
                    continue
                if anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                    broken.append(f"{where}: no heading #{anchor} in {name}")
    for line in broken:
        print(f"links: {line}", file=sys.stderr)
    print(f"links: {checked} relative links in {len(pages)} pages, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
