#!/usr/bin/env python3
"""Render and lint the Helm chart with the real Helm v4 engine (PyPI `helm-python-sdk`).

Tested with helm-python-sdk==0.2.2 (Helm Go SDK v4.2.3). No cluster is contacted.

Two modes:

  render.py render CHART_DIR [--values-json JSON] [--name NAME] [--namespace NS]
      Prints the rendered manifests as one multi-document YAML stream (NOTES.txt left out,
      templates in file-name order), ready for `kubectl apply -f -`. Exit 1 on a Helm error.

  render.py batch CHART_DIR < cases.json
      Reads a JSON list of cases {"op": "render"|"lint", "values": {...}, "name": "...",
      "namespace": "..."} and prints a JSON list of results, one per case:
        render ok:    {"ok": true, "manifests": {template path: text}, "notes": text}
        render error: {"ok": false, "error_type": "HelmValuesError", "error": "..."}
        lint:         {"ok": true, "lint": {"messages": [...], "errors": [...]}}
      (used by tests/chart_render.rs; one process for all cases).

Exit code 3 with a message on stderr when the `helm_python` module is missing.
"""

import argparse
import json
import sys

PINNED = "helm-python-sdk==0.2.2"

try:
    import helm_python as helm
except ImportError as exc:  # pragma: no cover - exercised by the Rust test's error path
    print(
        f"render.py: cannot import helm_python ({exc}); install it with: pip install {PINNED}",
        file=sys.stderr,
    )
    sys.exit(3)


def render(chart, values, name, namespace):
    try:
        out = chart.render(values=values or {}, name=name, namespace=namespace, is_install=True)
    except helm.HelmError as exc:
        return {"ok": False, "error_type": type(exc).__name__, "error": str(exc)}
    notes = ""
    manifests = {}
    for path, text in out.items():
        if path.endswith("NOTES.txt"):
            notes = text
        else:
            manifests[path] = text
    return {"ok": True, "manifests": manifests, "notes": notes}


def lint(chart_dir, values, namespace):
    try:
        report = helm.lint(chart_dir, values or {}, namespace=namespace)
    except helm.HelmError as exc:
        return {"ok": False, "error_type": type(exc).__name__, "error": str(exc)}
    return {"ok": True, "lint": report}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["render", "batch"])
    parser.add_argument("chart")
    parser.add_argument("--values-json", default="{}")
    parser.add_argument("--name", default="kube-descheduler")
    parser.add_argument("--namespace", default="kube-descheduler")
    args = parser.parse_args()

    with helm.Chart.load(args.chart) as chart:
        if args.mode == "render":
            result = render(chart, json.loads(args.values_json), args.name, args.namespace)
            if not result["ok"]:
                print(f"{result['error_type']}: {result['error']}", file=sys.stderr)
                return 1
            docs = []
            for path in sorted(result["manifests"]):
                text = result["manifests"][path].strip()
                if text:
                    docs.append(f"# Source: {path}\n{text}")
            sys.stdout.write("---\n" + "\n---\n".join(docs) + "\n")
            return 0

        cases = json.load(sys.stdin)
        results = []
        for case in cases:
            op = case.get("op", "render")
            name = case.get("name", "kube-descheduler")
            namespace = case.get("namespace", "kube-descheduler")
            if op == "render":
                results.append(render(chart, case.get("values"), name, namespace))
            elif op == "lint":
                results.append(lint(args.chart, case.get("values"), namespace))
            else:
                results.append({"ok": False, "error_type": "BadCase", "error": f"unknown op {op!r}"})
        json.dump(results, sys.stdout)
        return 0


if __name__ == "__main__":
    sys.exit(main())
