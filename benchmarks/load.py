"""Askers and uploaders at once, over real HTTP on loopback, for a bounded time.

Starts its own site as ``bin/start`` does (gunicorn sized by
``ragsite/gunicorn_conf.py``, or ``--workers`` x ``--threads``; one Celery
worker, threads pool, 2 at once; models loaded at start) on a fresh embedded
PostgreSQL and broker under a temporary RAGSITE_VAR_DIR (removed at the end),
with the demo corpus and the golden dataset's corpus ingested, and with
``--corpus pubmedqa`` (the default) also the first ``--documents`` documents
judged relevant in ``eval/pubmedqa_faq`` (biomedical abstracts and their
FAQ-shaped versions), whose questions are then asked. ``--sizes 2x4,1x8``
compares gunicorn sizes on the same corpus: each size is started in turn and
gets its own warm-up and scenarios. First a warm-up, with
the largest number of askers: every distinct question once (caches cold; its
figures are printed too). Then, for each of ``--scenarios``
(``ASKERS+UPLOADERS``, e.g. ``20+0,10+5``), for ``--seconds``:

- the askers each ask question after question (``POST
  /api/collections/load/query``, the default ``fast`` profile, extractive), each
  on one kept-alive connection of the standard library's ``http.client``: the load
  generator shares the machine's cores with the site, and httpx cost it two to
  three times the CPU a request.
  With ``--questions novel`` (the default) every question asked is new to the
  site: a corpus question with a numbered lead-in ("Question 1234: ..."), so the
  retrieval and question-vector caches miss while the passages' sentence
  vectors are warm, as on a site whose documents are asked about in new words;
  ``--questions repeat`` asks the corpus questions as they are;
- the uploaders each upload a new small Markdown file
  (``POST .../sources/upload``) and wait for its job to finish before the next.

Each user has their own token. The per-user API throttles are raised for the
run (RAG_THROTTLE_QUERY / RAG_THROTTLE_UPLOAD), so what is measured is the site,
not the throttle. Prints per kind: requests, requests per second, errors
(anything but 2xx, or no answer), p50 / p95 / max latency; for uploads also the
time from upload to job end; each web worker's connections held halfway through and its
CPU seconds (kept-alive clients shared evenly, ``ragsite/gunicorn_worker.py``); for a
scenario of askers alone, the web workers', PostgreSQL's
and the load generator's CPU-ms an answer (these too grow when a shared machine is slowed:
compare runs made one after the other). At the end it checks that every answer the askers
got is stored (one QueryRun each). ``--profile FILE`` samples the web workers
with py-spy during the first scenario and prints where their CPU went.
``--start-at UNIXTIME`` holds the scenarios until that moment: two runs given
the same time (one per checkout, each with its own site) share the machine's
same seconds, so the web workers' CPU-ms an answer of the two compare even
while the machine's speed swings.

Measured on a 2-core machine without GPU, shared with other work: see README
("Benchmarks"). ``--profile`` needs py-spy (requirements-dev.txt).
"""

from __future__ import annotations

import argparse
import atexit
import itertools
import logging
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from _django import isolated_django_setup
from _load_measure import cpu_seconds, spy_report, spy_start, web_workers
from _load_site import process_stop, site_prepare, web_start
from _load_traffic import Novel, Tally, asker, percentile, tally_print, uploader, warm_up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scenarios", default="20+0,10+5", help="ASKERS+UPLOADERS, comma-separated"
    )
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--corpus", choices=["demo", "pubmedqa"], default="pubmedqa")
    parser.add_argument("--documents", type=int, default=400, help="pubmedqa documents")
    parser.add_argument("--workers", type=int, help="gunicorn workers (default: its config)")
    parser.add_argument("--threads", type=int, help="gunicorn threads (default: its config)")
    parser.add_argument(
        "--sizes",
        help="gunicorn sizes to compare, WORKERSxTHREADS comma-separated (e.g. 2x4,1x8): "
        "each gets its own start, warm-up and scenarios on the same corpus",
    )
    parser.add_argument("--questions", choices=["novel", "repeat"], default="novel")
    parser.add_argument("--profile", type=Path, help="py-spy the web workers (first scenario)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument(
        "--start-at",
        type=float,
        help="begin the first scenario at this Unix time (after the warm-up): two runs "
        "started with the same time, e.g. of two checkouts, are measured over the same "
        "seconds of a shared machine",
    )
    args = parser.parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    scenarios = [tuple(int(n) for n in s.split("+")) for s in args.scenarios.split(",")]
    sizes: list[tuple[int | None, int | None]] = (
        [_size(s) for s in args.sizes.split(",")] if args.sizes else [(args.workers, args.threads)]
    )

    var = isolated_django_setup(
        name="load",
        RAG_WARMUP="1",
        RAG_THROTTLE_QUERY="100000/min",
        RAG_THROTTLE_UPLOAD="100000/min",
    )
    processes: list[subprocess.Popen[bytes]] = []
    log = open(var / "site.log", "ab")  # noqa: SIM115 - kept for the run
    try:
        askers = max(a for a, _ in scenarios)
        uploaders = max(u for _, u in scenarios)
        tokens, questions = site_prepare(var, log, processes, args, askers, uploaders)
        answered = 0
        counter = itertools.count(1)
        for index, (workers, threads) in enumerate(sizes):
            if index:
                process_stop(processes.pop())
            base = web_start(log, processes, workers, threads, tokens["asker0"])
            answered += _scenarios(
                args, var, processes, base, tokens, questions, scenarios, counter, index == 0
            )
    finally:
        for process in reversed(processes):
            process_stop(process)
        log.close()
    try:
        from query_app.models import QueryRun

        # The web server has stopped (and flushed whatever it held): every answer is stored.
        stored = QueryRun.objects.filter(collection__slug="load").count() - len(sizes)  # _ready's
        # At least one per answer received; a request the client gave up on is
        # still answered and stored by the site.
        print(f"stored runs: {stored} for {answered} answers received (none may be missing)")
    finally:
        from ragsite.embedded_db import embedded_server_stop

        embedded_server_stop(data_dir=var / "pgdata")
        if args.keep:
            atexit.unregister(shutil.rmtree)


def _size(text: str) -> tuple[int | None, int | None]:
    workers, _, threads = text.partition("x")
    return int(workers), int(threads)


def _scenarios(  # type: ignore[no-untyped-def]
    args, var, processes, base, tokens, corpus_questions, scenarios, counter, first_size
) -> int:
    """The warm-up, then each scenario against the web server just started; answers received."""
    askers = max(a for a, _ in scenarios)
    port = int(base.rpartition(":")[2].strip("/"))
    answered = warm_up(base, tokens, askers, corpus_questions)
    questions = Novel(corpus_questions, counter) if args.questions == "novel" else corpus_questions
    if args.start_at and first_size:
        wait = args.start_at - time.time()
        if wait < 0:
            print(f"start-at: ready {-wait:.0f} s late; this run did not start with its pair")
        else:
            print(f"start-at: waiting {wait:.0f} s")
            time.sleep(wait)
    for number, (n_ask, n_up) in enumerate(scenarios):
        print(f"scenario: {n_ask} askers + {n_up} uploaders for {args.seconds:.0f} s")
        profile = args.profile and number == 0 and first_size
        spy = spy_start(processes[-1], args.profile) if profile else None
        asked, uploaded = Tally(), Tally()
        stop = time.monotonic() + args.seconds
        threads = [
            threading.Thread(
                target=asker, args=(base, tokens[f"asker{n}"], stop, asked, n, questions)
            )
            for n in range(n_ask)
        ] + [
            threading.Thread(
                target=uploader, args=(base, tokens[f"uploader{n}"], stop, uploaded, n)
            )
            for n in range(n_up)
        ]
        cpu_before = cpu_seconds(processes, var)
        workers_before = web_workers(processes[-1], port)
        for thread in threads:
            thread.start()
        # Halfway through, the connections each web worker holds.
        time.sleep(args.seconds / 2)
        held = {pid: n for pid, (n, _) in web_workers(processes[-1], port).items()}
        for thread in threads:
            thread.join()
        cpu = {k: v - cpu_before.get(k, 0.0) for k, v in cpu_seconds(processes, var).items()}
        workers_cpu = {
            pid: used - workers_before.get(pid, (0, 0.0))[1]
            for pid, (_, used) in web_workers(processes[-1], port).items()
        }
        print(
            "  CPU seconds: "
            + ", ".join(f"{k} {v:.0f}" for k, v in cpu.items())
            + f" (of {2 * args.seconds:.0f} on 2 cores; os.cpu_count() {os.cpu_count()})"
        )
        # Clients keep their connections: an uneven split leaves one process
        # queueing while another has a core to spare.
        print(
            "  web workers: connections held halfway "
            + " / ".join(str(held.get(pid, 0)) for pid in workers_cpu)
            + ", CPU seconds "
            + " / ".join(f"{used:.0f}" for used in workers_cpu.values())
        )
        answered += len(asked.latencies) - len(asked.errors)
        tally_print("  ask", asked, args)
        if asked.latencies and not n_up:
            # What an answer costs in CPU, beside how many came per second.
            per = 1000.0 / len(asked.latencies)
            print(
                f"  CPU-ms an answer: web {cpu['web'] * per:.1f}, "
                f"PostgreSQL {cpu['postgres'] * per:.1f}, load generator "
                f"{cpu['load generator'] * per:.1f}"
            )
        if n_up:
            tally_print("  upload", uploaded, args)
        if uploaded.extra:
            print(
                f"  upload to job end: p50 {percentile(uploaded.extra, 0.5) * 1000:.0f} ms, "
                f"p95 {percentile(uploaded.extra, 0.95) * 1000:.0f} ms"
            )
        if spy is not None:
            spy_report(spy, args.profile)
    return answered


if __name__ == "__main__":
    main()
