#!/usr/bin/env python3
"""Regenerates requests.json from GitHub's REST description.

Usage (from this directory):
    npm pack @octokit/openapi@VERSION   # in a scratch directory
    tar xzf octokit-openapi-VERSION.tgz
    python3 extract.py package/generated/api.github.com.deref.json > requests.json

Only the operations the fake serves are kept, and of each only what the fake
validates: query parameters and the JSON request body schema, with
descriptions and examples removed.
"""
import json
import sys

OPERATIONS = [
    ("get", "/app"),
    ("post", "/app/installations/{installation_id}/access_tokens"),
    ("post", "/app-manifests/{code}/conversions"),
    ("get", "/app/hook/deliveries"),
    ("post", "/app/hook/deliveries/{delivery_id}/attempts"),
    ("delete", "/installation/token"),
    ("get", "/repos/{owner}/{repo}"),
    ("get", "/repos/{owner}/{repo}/git/ref/{ref}"),
    ("post", "/repos/{owner}/{repo}/git/refs"),
    ("patch", "/repos/{owner}/{repo}/git/refs/{ref}"),
    ("get", "/repos/{owner}/{repo}/git/commits/{commit_sha}"),
    ("post", "/repos/{owner}/{repo}/git/commits"),
    ("get", "/repos/{owner}/{repo}/git/trees/{tree_sha}"),
    ("get", "/repos/{owner}/{repo}/pulls"),
    ("post", "/repos/{owner}/{repo}/pulls"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}"),
    ("post", "/repos/{owner}/{repo}/check-runs"),
    ("get", "/repos/{owner}/{repo}/check-runs/{check_run_id}"),
    ("patch", "/repos/{owner}/{repo}/check-runs/{check_run_id}"),
    ("get", "/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations"),
    ("get", "/repos/{owner}/{repo}/commits/{ref}/check-runs"),
]

DROP = {"description", "example", "examples"}


def strip(s):
    if isinstance(s, dict):
        out = {}
        for k, v in s.items():
            if k in DROP:
                continue
            if k == "title" and not isinstance(v, dict):
                continue  # a schema's display title, not a property named "title"
            out[k] = strip(v)
        return out
    if isinstance(s, list):
        return [strip(x) for x in s]
    return s


def main():
    spec = json.load(open(sys.argv[1]))
    ops = {}
    for method, path in OPERATIONS:
        op = spec["paths"][path][method]
        entry = {
            "operation_id": op["operationId"],
            "documentation_url": op.get("externalDocs", {}).get("url", "https://docs.github.com/rest"),
        }
        query = {p["name"]: strip(p["schema"]) for p in op.get("parameters", []) if p["in"] == "query"}
        if query:
            entry["query"] = query
        body = op.get("requestBody")
        if body:
            entry["body"] = strip(body["content"]["application/json"]["schema"])
        ops[method.upper() + " " + path] = entry
    json.dump({"source": "@octokit/openapi@" + spec["info"]["version"] + " generated/api.github.com.deref.json",
               "operations": ops}, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


main()
