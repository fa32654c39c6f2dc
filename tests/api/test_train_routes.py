"""``GET /api/train/runs`` pages: ``limit`` / ``offset`` slices with the total in ``X-Total-Count``,
the call without paging parameters one page (``listing.PAGE_SIZE``), and a bad paging value a 422 naming its field. The
training router alone over a real ``RunStore``, in-process (no page, no worker)."""

from types import SimpleNamespace

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api import errors
from api.train_routes import TOTAL_HEADER, router
from trainer_core.runs.listing import PAGE_SIZE
from trainer_core.runs.store import RunStore
from ui.run_filters import RUNS_PAGE


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    store = RunStore(tmp_path_factory.mktemp("routes") / "studio.db")
    for i in range(5):
        store.create_run(f"job_{i}", {"hf_dataset": "org/chat"}, f"/runs/{i}", "training", created_at=1000.0 + i)
        store.finish_run(f"job_{i}", "completed", None, None, "completed")
    app = FastAPI()
    app.state.runner = SimpleNamespace(store=store)
    app.state.settings = SimpleNamespace(api_token=None)
    errors.install(app)
    app.include_router(router)
    with TestClient(app) as client:
        yield client
    store.close()


def _ids(response) -> list[str]:
    assert response.status_code == 200, response.text
    return [run["job_id"] for run in response.json()]


def test_runs_come_in_pages_with_the_total(api):
    assert _ids(api.get("/api/train/runs")) == ["job_4", "job_3", "job_2", "job_1", "job_0"]  # as before
    page = api.get("/api/train/runs", params={"limit": 2, "offset": 1})
    assert _ids(page) == ["job_3", "job_2"] and page.headers[TOTAL_HEADER] == "5"
    assert _ids(api.get("/api/train/runs", params={"limit": 2, "offset": 4})) == ["job_0"]
    assert _ids(api.get("/api/train/runs", params={"offset": 9})) == []
    filtered = api.get("/api/train/runs", params={"name": "job_3", "limit": 1})
    assert _ids(filtered) == ["job_3"] and filtered.headers[TOTAL_HEADER] == "1"


def test_without_a_limit_one_page_comes_as_the_runs_tab_shows_it(tmp_path):
    """A history longer than a page: the call without ``limit`` answers the newest ``PAGE_SIZE``
    (the Runs tab's first rows) and the total, so a history of 1,000 runs answers as fast as a short one."""
    store = RunStore(tmp_path / "studio.db")
    for i in range(PAGE_SIZE + 7):
        store.create_run(f"job_{i:03d}", {}, f"/runs/{i}", "completed", created_at=1000.0 + i)
    app = FastAPI()
    app.state.runner = SimpleNamespace(store=store)
    app.state.settings = SimpleNamespace(api_token=None)
    app.include_router(router)
    with TestClient(app) as client:
        page = client.get("/api/train/runs")
        rest = client.get("/api/train/runs", params={"offset": PAGE_SIZE})
    store.close()
    assert PAGE_SIZE == RUNS_PAGE == 50
    assert _ids(page) == [f"job_{i:03d}" for i in range(PAGE_SIZE + 6, 6, -1)]
    assert page.headers[TOTAL_HEADER] == str(PAGE_SIZE + 7)
    assert _ids(rest) == [f"job_{i:03d}" for i in range(6, -1, -1)]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"offset": -1}, "offset"),
        ({"offset": "next"}, "offset"),
        ({"offset": 10**30}, "offset"),
        ({"limit": 0}, "limit"),
        ({"limit": 10_001}, "limit"),
        ({"limit": "all"}, "limit"),
    ],
)
def test_a_bad_paging_value_is_a_422_naming_its_field(api, params, field):
    response = api.get("/api/train/runs", params=params)
    assert response.status_code == 422, response.text
    assert response.json()["fields"] == [field]
