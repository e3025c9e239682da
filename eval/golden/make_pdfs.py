"""Generate the PDF documents of the shipped golden corpus.

The PDFs are committed; run this only after changing their text here:

    .venv/bin/python eval/golden/make_pdfs.py

Output is reproducible (fixed creation date), so regenerating unchanged text leaves
the files, and the dataset's content hash, unchanged. Text is plain ASCII because
the PDF core fonts carry no euro sign; amounts are written "EUR 45".
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from fpdf import FPDF

CORPUS = Path(__file__).resolve().parent / "corpus"
CREATED = dt.datetime(2024, 8, 1, 12, 0, tzinfo=dt.UTC)

# Each document: (relative path, title, pages); a page is a list of (style, text).
Block = tuple[str, str]
DOCUMENTS: list[tuple[str, str, list[list[Block]]]] = [
    (
        "lanternfish/admin-guide.pdf",
        "Lanternfish Administration Guide",
        [
            [
                ("h1", "Lanternfish Administration Guide"),
                ("p", "Version 3.4. This guide is for administrators who run Lanternfish Server."),
                ("h2", "Contents"),
                ("li", "1. Overview (page 1)"),
                ("li", "2. Backup schedules (page 2)"),
                ("li", "3. Restoring data (page 3)"),
                ("li", "4. Vault maintenance (page 4)"),
                ("h2", "1. Overview"),
                (
                    "p",
                    "A Lanternfish installation has one server, any number of agents and one "
                    "or more vaults. Agents run on the machines you protect and send changed "
                    "data to the server, which deduplicates, compresses and encrypts it into "
                    "vaults. The server keeps a catalogue of every snapshot.",
                ),
            ],
            [
                ("h2", "2. Backup schedules"),
                (
                    "p",
                    "Schedules use cron syntax. Unless you change it, every agent is backed up "
                    "once a day at 02:00 server time (0 2 * * *).",
                ),
                (
                    "p",
                    "A job that is still running when its next start time comes is skipped, "
                    "not queued, and the skip is recorded in the job history.",
                ),
                (
                    "p",
                    "Lanternfish never needs a full backup after the first one: every snapshot "
                    "is a synthetic full snapshot built from the chunks already in the vault.",
                ),
                (
                    "p",
                    "At most 4 jobs run at the same time; raise max_jobs in the [jobs] section "
                    "of lanternfish.toml on servers with more than 8 CPU cores.",
                ),
            ],
            [
                ("h2", "3. Restoring data"),
                (
                    "p",
                    "To restore a snapshot, run: lanternfish restore --snapshot <ID> --target <path>",
                ),
                (
                    "p",
                    "Existing files are never replaced unless you add --overwrite; without it, "
                    "a restored file that already exists gets the suffix .restored.",
                ),
                ("p", "Restoring to the original machine requires its agent to be online."),
                (
                    "p",
                    "For a bare-metal restore, boot the machine from the Lanternfish Rescue ISO "
                    "written to a USB stick of at least 2 GB, then pick the snapshot from the list.",
                ),
            ],
            [
                ("h2", "4. Vault maintenance"),
                (
                    "p",
                    "Run lanternfish verify every week and lanternfish verify --deep every month.",
                ),
                ("p", "Pruning runs every day at 05:00 and applies the retention settings."),
                (
                    "p",
                    "To move a vault: stop lanternfishd, copy the vault directory with rsync -aH, "
                    "change vault_path and start lanternfishd again.",
                ),
            ],
        ],
    ),
    (
        "quillmate/datasheet-q3.pdf",
        "Quillmate Q3 datasheet",
        [
            [
                ("h1", "Quillmate Q3 datasheet"),
                ("h2", "Physical"),
                ("li", "Dimensions: 162 x 68 x 31 mm"),
                ("li", "Weight: 182 g including the battery"),
                ("li", "Display: 2.4 inch colour touch screen"),
                ("h2", "Power"),
                ("li", "Battery: 3200 mAh lithium-ion, replaceable without tools"),
                ("li", "Charging: USB-C, 5 V 2 A, or the Quillmate Dock QD-2"),
                ("h2", "Scanning"),
                (
                    "li",
                    "Symbologies: EAN-13, UPC-A, Code 128, Code 39, QR Code, Data Matrix, PDF417",
                ),
                ("li", "Reading distance: 4 to 60 cm for Code 128"),
                ("h2", "Connectivity"),
                ("li", "Wi-Fi 6 (802.11ax) and Bluetooth 5.3"),
            ],
            [
                ("h2", "Environmental"),
                ("li", "Sealing: IP65 (dust-tight, protected against water jets)"),
                ("li", "Drops: survives repeated 1.8 m drops onto concrete"),
                ("li", "Operating temperature: -10 to 50 C"),
                ("li", "Storage temperature: -20 to 60 C"),
                ("li", "Humidity: 5 to 95 % non-condensing"),
                ("h2", "Compliance"),
                ("li", "CE, FCC Part 15, RoHS"),
                ("h2", "Hardware revisions"),
                ("p", "Revision C has been shipping since January 2024."),
            ],
        ],
    ),
    (
        "beacon-api/sdk-guide.pdf",
        "Beacon Python SDK guide",
        [
            [
                ("h1", "Beacon Python SDK guide"),
                ("h2", "Installing"),
                ("p", "Install the SDK with pip install beacon-sdk. It needs Python 3.9 or newer."),
                ("h2", "Creating a client"),
                ("p", "from beacon import Client; client = Client(api_key=...)"),
                (
                    "p",
                    "Requests time out after 30 seconds by default; pass timeout= to the client "
                    "to change it.",
                ),
            ],
            [
                ("h2", "Retries"),
                (
                    "p",
                    "The SDK retries responses with status 429 and 5xx up to 3 times, with "
                    "exponential backoff starting at 0.5 seconds, and honours the Retry-After "
                    "header.",
                ),
                ("h2", "Pagination"),
                ("p", "client.devices.iter_all() follows next_cursor for you."),
                ("h2", "Logging"),
                ("p", "Set the environment variable BEACON_LOG=debug to log every request."),
                ("h2", "Versions"),
                ("p", "SDK 1.x supports API v2 only."),
            ],
        ],
    ),
    (
        "policies/warranty.pdf",
        "Hardware warranty",
        [
            [
                ("h1", "Hardware warranty"),
                (
                    "p",
                    "Orrery Works warrants Quillmate scanners and docks against defects in "
                    "materials and workmanship for 24 months from delivery. Batteries are "
                    "covered for 12 months.",
                ),
                ("h2", "Quillmate Care+"),
                (
                    "p",
                    "Quillmate Care+ (SKU-20977) extends the warranty of one scanner to 36 "
                    "months and includes one replacement after accidental damage.",
                ),
            ],
            [
                ("h2", "What the warranty does not cover"),
                ("li", "Damage from liquids beyond the IP65 rating."),
                (
                    "li",
                    "Damage from chargers other than Orrery Works chargers that supply more "
                    "than 5 V.",
                ),
                ("li", "Devices whose housing was opened."),
                ("h2", "Returns (RMA)"),
                (
                    "p",
                    "Request a return in the customer portal. Care+ customers receive an advance "
                    "replacement shipped within 2 business days. Other devices are repaired "
                    "within 10 business days after we receive them. The customer pays shipping "
                    "to Orrery Works; we pay the return shipping.",
                ),
            ],
        ],
    ),
    (
        "policies/hr-handbook.pdf",
        "Orrery Works Employee Handbook 2024",
        [
            [
                ("h1", "Orrery Works Employee Handbook 2024"),
                (
                    "p",
                    "This handbook applies to all employees in Belgium and the Netherlands. "
                    "Employees in Portugal have a local addendum.",
                ),
                ("h2", "Working hours"),
                (
                    "p",
                    "The working week is 38 hours. Core hours are 10:00 to 15:00; outside them "
                    "you choose your hours with your team.",
                ),
            ],
            [
                ("h2", "Leave"),
                (
                    "p",
                    "Full-time employees get 25 working days of annual leave per year, in "
                    "addition to the public holidays in the holiday calendar of their office.",
                ),
                (
                    "p",
                    "Up to 5 unused days can be carried over until 31 March of the following "
                    "year; other unused days lapse.",
                ),
                ("h2", "Sick leave"),
                (
                    "p",
                    "Tell your manager before 09:30 on the first day. A doctor's note is "
                    "required from the third day of absence.",
                ),
            ],
            [
                ("h2", "Remote work"),
                (
                    "p",
                    "Employees may work remotely up to 3 days per week, agreed with their manager.",
                ),
                (
                    "p",
                    "The home-office allowance is EUR 600 once every 3 years, plus EUR 30 per "
                    "month towards internet costs.",
                ),
                (
                    "p",
                    "Working from abroad is allowed for up to 20 days per year, with the "
                    "approval of HR.",
                ),
            ],
            [
                ("h2", "Expenses"),
                ("p", "Submit expenses within 60 days in Expensa, with the receipts."),
                ("p", "Meals while travelling are reimbursed up to EUR 45 per day."),
                ("p", "Travel by private car is reimbursed at EUR 0.42 per km."),
                (
                    "p",
                    "Your manager approves expenses up to EUR 1,000; above that amount, the "
                    "finance director approves them.",
                ),
            ],
        ],
    ),
    (
        "policies/travel-policy.pdf",
        "Travel policy",
        [
            [
                ("h1", "Travel policy"),
                ("p", "Book all business travel through TripDesk at least 14 days in advance."),
                ("p", "Take the train for journeys under 500 km when it takes less than 5 hours."),
            ],
            [
                ("h2", "Flights"),
                (
                    "p",
                    "Book economy class for flights under 6 hours. For flights of 6 hours or "
                    "longer, premium economy is allowed; business class is not reimbursed.",
                ),
                ("h2", "Hotels"),
                (
                    "p",
                    "Hotels are reimbursed up to EUR 160 per night, or EUR 220 per night in "
                    "London, Paris, Zurich and New York.",
                ),
            ],
            [
                ("h2", "Insurance and emergencies"),
                (
                    "p",
                    "Every business trip is covered by the company travel insurance, policy "
                    "number TRV-88213. In an emergency call the travel assistance line "
                    "+32 9 555 01 99, day and night.",
                ),
                ("h2", "Cancellations"),
                (
                    "p",
                    "Cancel through TripDesk. No-show fees caused by personal reasons are not "
                    "reimbursed.",
                ),
            ],
        ],
    ),
    (
        "company/incident-2024-07.pdf",
        "Incident report INC-2024-031",
        [
            [
                ("h1", "Incident report INC-2024-031"),
                ("p", "Beacon Cloud outage on 18 July 2024."),
                ("h2", "Summary"),
                (
                    "p",
                    "For 47 minutes, from 09:12 to 09:59 CEST, the Beacon Cloud API answered "
                    "every request with 503 Service Unavailable. Scanners kept their scans in "
                    "the offline buffer and uploaded them afterwards; no data was lost.",
                ),
                ("h2", "Root cause"),
                (
                    "p",
                    "The TLS certificate of the internal message broker expired. Its automated "
                    "renewal had been switched off during the data-centre move to Frankfurt and "
                    "was not switched on again.",
                ),
            ],
            [
                ("h2", "Action items"),
                (
                    "li",
                    "1. Switch automated certificate renewal back on. Owner: Jonas Peeters. "
                    "Done on 19 July.",
                ),
                (
                    "li",
                    "2. Alert 30 days before any certificate expires. Owner: Aisha Bakker. "
                    "Due on 15 August.",
                ),
                (
                    "li",
                    "3. Show the message broker on the public status page. Owner: Platform team.",
                ),
                ("h2", "Customer communication"),
                (
                    "p",
                    "Customers on the Business and Enterprise plans receive a 10 % service "
                    "credit on their July invoice.",
                ),
            ],
        ],
    ),
]


class _Document(FPDF):
    def footer(self) -> None:
        # A page footer makes page boundaries visible to readers and to text extraction.
        self.set_y(-15)
        self.set_font("Helvetica", "I", 8)
        self.cell(0, 10, f"Page {self.page_no()} of {{nb}}", align="C")


def render(title: str, pages: list[list[Block]], target: Path) -> None:
    """Write one PDF with a real text layer, one list of blocks per page."""
    pdf = _Document(format="A4")
    pdf.set_creation_date(CREATED)
    pdf.set_title(title)
    pdf.set_author("Orrery Works")
    pdf.set_margins(20, 20, 20)
    for blocks in pages:
        pdf.add_page()
        for style, text in blocks:
            if style == "h1":
                pdf.set_font("Helvetica", "B", 18)
                pdf.multi_cell(0, 10, text, new_x="LMARGIN", new_y="NEXT")
                pdf.ln(2)
            elif style == "h2":
                pdf.ln(2)
                pdf.set_font("Helvetica", "B", 13)
                pdf.multi_cell(0, 8, text, new_x="LMARGIN", new_y="NEXT")
            elif style == "li":
                pdf.set_font("Helvetica", "", 11)
                pdf.multi_cell(0, 6, f"- {text}", new_x="LMARGIN", new_y="NEXT")
            else:
                pdf.set_font("Helvetica", "", 11)
                pdf.multi_cell(0, 6, text, new_x="LMARGIN", new_y="NEXT")
                pdf.ln(2)
    target.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(target))


def main() -> None:
    for relative, title, pages in DOCUMENTS:
        target = CORPUS / relative
        render(title, pages, target)
        print(f"wrote {target.relative_to(CORPUS.parent)} ({len(pages)} pages)")


if __name__ == "__main__":
    main()
