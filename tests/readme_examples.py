#!/usr/bin/env python3
"""Runs the README's marked examples and checks the figures it quotes.

A `<!-- check -->` line before a fenced block marks an example:

- a ```sh block: every `dtsim ...` line runs (a trailing backslash continues
  it); the figures in the `#` comments after it must appear in its output;
  when an output block follows the sh block, the figures in it must appear
  in the outputs of all its commands;
- an output block whose first line is `$ dtsim ...`: that command runs and
  the figures in the rest of the block must appear in its output;
- `<!-- check: dtsim ... -->` names the command of the output block after it.

`ignore: 18.0 ...` in the marker lists figures that are not the model's (a
search's wall time). A figure appears when some number of the output is
within 2% of it (the README rounds). Commands run in a scratch directory
with DTSIM_BIN for `dtsim`. Exit 0 when every figure is found, 1 otherwise,
naming the README line of each figure that is not.
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile

TOLERANCE = 0.02
NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:,\d{3})*(?:\.\d+)?(?![\w])")
MARKER = re.compile(r"^<!-- check(?::\s*(.*?))?\s*-->\s*$")


def numbers(text):
    return [float(m.group().replace(",", "")) for m in NUMBER.finditer(text)]


def appears(figure, found):
    return any(abs(n - figure) <= TOLERANCE * max(abs(figure), 1e-9) for n in found)


def fenced_block(lines, start):
    """The fenced block at or after `start`: (info string, first body line, body)."""
    i = start
    while not lines[i].startswith("```"):
        i += 1
    info = lines[i][3:].strip()
    j = i + 1
    while not lines[j].startswith("```"):
        j += 1
    return info, i + 1, lines[i + 1 : j], j + 1


def commands_with_comments(body, first):
    """[(command, [(line number, comment text)])] of a sh block."""
    out = []
    i = 0
    while i < len(body):
        line = body[i]
        stripped = line.strip()
        if stripped.startswith("dtsim "):
            command, comments = "", []
            while True:
                code, _, comment = body[i].partition("#")
                if comment:
                    comments.append((first + i, comment))
                command += code.rstrip().rstrip("\\") + " "
                if not code.rstrip().endswith("\\"):
                    break
                i += 1
            i += 1
            while i < len(body) and body[i].strip().startswith("#"):
                comments.append((first + i, body[i].strip()[1:]))
                i += 1
            out.append((command.strip(), comments))
        else:
            i += 1
    return out


def run(command, dtsim, cwd):
    argv = shlex.split(command)
    argv[0] = dtsim
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"`{command}` exited {result.returncode}: {result.stderr.strip()}")
    return result.stdout


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    readme = os.path.join(root, "README.md")
    dtsim = os.environ.get("DTSIM_BIN", os.path.join(root, "build", "src", "cli", "dtsim"))
    lines = open(readme, encoding="utf-8").read().split("\n")
    missing, checked, examples = [], 0, 0
    with tempfile.TemporaryDirectory(prefix="dtsim-readme-") as scratch:
        examples, checked = check_all(lines, dtsim, scratch, missing)
    for m in missing:
        print(m)
    print(f"readme: {examples} examples, {checked} figures checked, {len(missing)} not found")
    return 1 if missing or examples == 0 else 0


def check_all(lines, dtsim, scratch, missing):
    """Runs every marked example; appends what is not found to `missing`."""
    checked, examples = 0, 0

    def expect(readme_line, text, output, ignore):
        nonlocal checked
        found = numbers(output)
        for figure in numbers(text):
            if figure in ignore:
                continue
            checked += 1
            if not appears(figure, found):
                missing.append(f"README.md:{readme_line}: {figure:g} is not in the output")

    for index, line in enumerate(lines):
        marker = MARKER.match(line)
        if not marker:
            continue
        examples += 1
        spec = marker.group(1) or ""
        ignore = set()
        if "ignore:" in spec:
            spec, _, ignored = spec.partition("ignore:")
            ignore = set(numbers(ignored))
        spec = spec.strip()
        info, first, body, after = fenced_block(lines, index + 1)
        try:
            if spec.startswith("dtsim "):
                output = run(spec, dtsim, scratch)
                for k, text in enumerate(body):
                    expect(first + k + 1, text, output, ignore)
            elif info == "sh":
                commands = commands_with_comments(body, first + 1)
                outputs = [run(c, dtsim, scratch) for c, _ in commands]
                for (command, comments), output in zip(commands, outputs):
                    for readme_line, text in comments:
                        expect(readme_line, text, output, ignore)
                follow = after
                while follow < len(lines) and not lines[follow].strip():
                    follow += 1
                if follow < len(lines) and lines[follow].strip() == "```":
                    _, out_first, out_body, _ = fenced_block(lines, follow)
                    for k, text in enumerate(out_body):
                        expect(out_first + k + 1, text, "".join(outputs), ignore)
            elif body and body[0].startswith("$ dtsim "):
                command, k = body[0][2:], 0
                while body[k].rstrip().endswith("\\"):
                    command = command.rstrip().rstrip("\\") + " " + body[k + 1].strip()
                    k += 1
                output = run(command, dtsim, scratch)
                for j in range(k + 1, len(body)):
                    expect(first + j + 1, body[j], output, ignore)
            else:
                missing.append(f"README.md:{index + 1}: a check marker before a block with no dtsim command")
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            missing.append(f"README.md:{index + 1}: {e}")

    return examples, checked


if __name__ == "__main__":
    sys.exit(main())
