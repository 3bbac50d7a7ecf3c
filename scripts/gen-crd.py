#!/usr/bin/env python3
"""Writes this project's ManifestWorkReplicaSet CRD: upstream's schema (from the
open-cluster-management.io/api Go module) plus the fields this project adds. The result is
committed under deploy/crds/ and as the Helm chart's files/crd.yaml; crates/api/tests/crd.rs checks it against the Rust types and
the hub tests check it is a superset of upstream's.

Usage: scripts/gen-crd.py [API_MODULE_DIR]   (default: downloads open-cluster-management.io/api@v1.3.0)
"""
import json
import os
import subprocess
import sys

import yaml

API_VERSION = "v1.3.0"
OPERATOR_VERSION_ANNOTATION = "operator.open-cluster-management.io/version"
OPERATOR_VERSION_GUARD = "999.0.0"
UPSTREAM = "work/v1alpha1/0000_00_work.open-cluster-management.io_manifestworkreplicasets.crd.yaml"
OUT = os.path.join(os.path.dirname(__file__), "..", "deploy", "crds",
                   "0000_00_work.open-cluster-management.io_manifestworkreplicasets.crd.yaml")
# The chart's copy (Helm reads files only from within the chart).
CHART_COPY = os.path.join(os.path.dirname(__file__), "..", "deploy", "helm", "mwrs-controller",
                          "files", "crd.yaml")


def module_dir():
    if len(sys.argv) > 1:
        return sys.argv[1]
    out = subprocess.check_output(
        ["go", "mod", "download", "-json", f"open-cluster-management.io/api@{API_VERSION}"])
    return json.loads(out)["Dir"]


def main():
    with open(os.path.join(module_dir(), UPSTREAM)) as f:
        crd = yaml.safe_load(f)
    annotations = crd["metadata"].setdefault("annotations", {})
    annotations["mwrs.rollout.open-cluster-management.io/schema"] = "revisions"
    # Upstream's cluster-manager operator re-applies its own copy of this CRD over any
    # copy whose version annotation is missing or lower than the operator's version
    # (ocm pkg/operator/operators/crdmanager, shouldUpdate), which would prune every
    # field added below. A version above any OCM release keeps the operator off it.
    annotations[OPERATOR_VERSION_ANNOTATION] = OPERATOR_VERSION_GUARD
    version = crd["spec"]["versions"][0]
    root = version["schema"]["openAPIV3Schema"]
    spec = root["properties"]["spec"]["properties"]
    spec["revisionHistoryLimit"] = {
        "description": "revisionHistoryLimit is how many revisions of the template that are "
                       "neither current nor being rolled out are kept as ControllerRevisions "
                       "for undo. Defaults to 10.",
        "type": "integer", "format": "int32", "minimum": 0, "default": 10,
    }
    strategy = spec["placementRefs"]["items"]["properties"]["rolloutStrategy"]["properties"]
    strategy["failureStrategy"] = {
        "description": "failureStrategy is what a breach of maxFailures does. Absent: no new "
                       "cluster starts (the rollout stops). AbortAll: every cluster of the "
                       "ManifestWorkReplicaSet goes back to the current (stable) revision at "
                       "once and the failed revision is held.",
        "type": "string", "enum": ["AbortAll"],
    }
    strategy["plugin"] = {
        "description": "plugin is the rollout plugin (OCM enhancement 231), by its name in the "
                       "controller's --work-config, that validates each cluster: a cluster its "
                       "agent reports done is Validating until the plugin says SUCCEEDED; "
                       "FAILED counts as a failure. While the plugin does not answer, the "
                       "rollout holds.",
        "type": "string", "maxLength": 63, "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
    }
    strategy["pluginFailurePolicy"] = {
        "description": "pluginFailurePolicy is this placementRef's failure budget for its plugin; "
                       "a field left out takes the plugin's registration (defaults: Fail, 4, 5m).",
        "type": "object",
        "properties": {
            "policy": {
                "description": "policy is what happens past the budget: Fail counts the "
                               "clusters the plugin holds as failed (maxFailures and AbortAll "
                               "apply); Hold keeps holding them.",
                "type": "string", "enum": ["Fail", "Hold"]},
            "consecutiveErrors": {
                "description": "consecutiveErrors is how many calls about one cluster may go "
                               "wrong in a row (an error, or an answer refused as unusable).",
                "type": "integer", "format": "int32", "minimum": 1},
            "unavailableFor": {
                "description": "unavailableFor is how long the plugin may be unreachable (a Go "
                               "duration such as 5m).",
                "type": "string"},
        },
    }
    status = root["properties"]["status"]["properties"]
    status["currentRevision"] = {
        "description": "currentRevision is the hash of the last revision that completed on "
                       "every desired cluster (the stable revision).",
        "type": "string"}
    status["updateRevision"] = {
        "description": "updateRevision is the hash of the revision built from the current spec.",
        "type": "string"}
    status["collisionCount"] = {
        "description": "collisionCount counts hash collisions of revision names; it is mixed "
                       "into the hash of new revisions.",
        "type": "integer", "format": "int32"}
    status["abortedTime"] = {
        "description": "abortedTime is when the current abort began; cleared when a new "
                       "revision starts rolling out.",
        "type": "string", "format": "date-time"}
    status["observedGeneration"] = {
        "description": "observedGeneration is the metadata.generation this status was computed from.",
        "type": "integer", "format": "int64"}
    status["handledControls"] = {
        "description": "handledControls records the manual control requests (annotations) "
                       "already acted on, so that none is acted on twice.",
        "type": "object",
        "properties": {"abort": {"type": "string"}, "retry": {"type": "string"}}}
    names = {"type": "array", "items": {"type": "string"}}
    status["lastAbort"] = {
        "description": "lastAbort is the last abort and its cause, kept until a new revision "
                       "or a retry rolls.",
        "type": "object",
        "required": ["trigger", "time", "revision"],
        "properties": {
            "trigger": {"description": "ProgressDeadlineExceeded, MaxFailuresExceeded or "
                                       "Requested (a user's abort).", "type": "string"},
            "time": {"type": "string", "format": "date-time"},
            "revision": {"description": "The aborted revision.", "type": "string"},
            "revertedTo": {"description": "The stable revision the clusters went back to; "
                                          "absent when there was none: the rollout stopped.",
                           "type": "string"},
            "timedOutClusters": dict(names, description="Clusters past their progress "
                                                        "deadline (the first ten)."),
            "timedOutCount": {"type": "integer", "format": "int64"},
            "failedClusters": dict(names, description="Clusters counted as failed (the "
                                                      "first ten): the agent reported "
                                                      "Degraded, the rollout plugin said "
                                                      "FAILED or spent its failure budget "
                                                      "(PluginFailed), or the hub refused the "
                                                      "ManifestWork's write."),
            "failedCount": {"type": "integer", "format": "int64"},
        }}
    status["blockedClusters"] = {
        "description": "blockedClusters lists the clusters whose ManifestWork the controller "
                       "cannot write for now (the hub refused the write, or another owner "
                       "holds the name), and why; the first 50.",
        "type": "array",
        "items": {"type": "object", "required": ["cluster", "message"],
                  "properties": {"cluster": {"type": "string"},
                                 "message": {"type": "string"}}}}
    status["pluginJudged"] = {
        "description": "pluginJudged holds the clusters a rollout plugin judged SUCCEEDED on "
                       "the revision it is judging, one bit per chosen cluster in the order of "
                       "their names, sealed by the controller, so that a restarted replica "
                       "asks none of them again.",
        "type": "object",
        "required": ["revision", "count", "clusters", "about"],
        "properties": {
            "revision": {"type": "string"},
            "count": {"type": "integer", "format": "int64"},
            "clusters": {"description": "The bits, base64; bit i % 8 of byte i / 8 is the "
                                        "i-th chosen cluster.",
                         "type": "string"},
            "about": {"description": "A digest of the chosen clusters' names, the judged "
                                     "ones' ManifestWork generations and the plugins named.",
                      "type": "string"},
            "seal": {"type": "string"},
        }}
    # Upstream's text names condition types no controller sets; these are the ones this
    # controller writes (crates/api/src/mwrs.rs, mod condition).
    status["conditions"]["description"] = (
        "conditions of the rollout. PlacementVerified: every placementRef's Placement exists "
        "and selects clusters (False: PlacementDecisionNotFound or PlacementDecisionEmpty, "
        "the rollout is Blocked). ManifestworkApplied: the target revision (the update "
        "revision, or the stable one while an abort reverts to it) is applied on every desired "
        "cluster (False: Processing while clusters are in flight, NotAsExpected with failed "
        "clusters or none selected). PlacementRolledOut: every desired cluster runs the target "
        "revision (False: Progressing, or RolloutDegraded after failures or an abort). "
        "Progressing: the rollout of the update "
        "revision; True while it rolls out (NewRevisionCreated, FoundNewRevision), False once "
        "it ended (NewManifestWorkAvailable when complete; ProgressDeadlineExceeded or "
        "MaxFailuresExceeded when it stopped; RolloutAborted when an abort holds it; "
        "AbortFailed when there was no stable revision to go back to; InvalidSpec when the "
        "spec cannot be acted on), Unknown while paused (RolloutPaused). PluginLoaded, only "
        "where a placementRef names a rollout plugin: Available, Unknown (NotAskedYet: this "
        "replica has not asked it yet, e.g. just after it began to lead; its clusters wait, "
        "no deadline runs), Failed (naming each plugin that does not answer) or Skipped "
        "(rolled out past its plugins).")
    version["additionalPrinterColumns"] += [
        {"name": "Current", "type": "string", "jsonPath": ".status.currentRevision",
         "description": "Stable revision"},
        {"name": "Update", "type": "string", "jsonPath": ".status.updateRevision",
         "description": "Revision of the current spec"},
        {"name": "Progressing", "type": "string",
         "jsonPath": '.status.conditions[?(@.type=="Progressing")].reason',
         "description": "Rollout state"},
    ]
    for out in (OUT, CHART_COPY):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "w") as f:
            f.write("# Generated by scripts/gen-crd.py from open-cluster-management.io/api "
                    f"{API_VERSION}; do not edit.\n")
            yaml.safe_dump(crd, f, sort_keys=False, width=100)


if __name__ == "__main__":
    main()
