"""A short config whose templates would render gigabytes is refused with a 422 naming the field,
before any work: nothing is stored and the manager keeps serving."""

from __future__ import annotations

YAML = {"Content-Type": "application/yaml"}
# 150 bytes that once made the manager render a 10 GB string per persona.
POPULATION_BOMB = """\
name: tpl
size: 10
distributions: [{name: education, categories: [{name: a, weight: 1}]}]
persona: {mode: template, template: "You are {education:>10000000000}."}
"""


def test_a_format_spec_in_a_persona_template_is_a_422_and_stores_nothing(shared_manager):
    with shared_manager.api() as api:
        before = api.get("/api/populations").json()
        for body in (POPULATION_BOMB, POPULATION_BOMB.replace(":>10000000000", "!r")):
            for path in ("/api/populations", "/api/populations/validate"):
                answer = api.post(path, content=body, headers=YAML)
                assert answer.status_code == 422, answer.text
                (error,) = answer.json()["detail"]
                assert error["loc"][-2:] == ["persona", "template"]
                assert "must be a plain name like {education}" in error["msg"]
        assert api.get("/api/populations").json() == before
        assert api.get("/healthz").status_code == 200


def test_a_prompt_of_many_personas_is_a_422(shared_manager):
    config = {
        "population_id": 1,
        "rounds": 1,
        "policy": {"kind": "synthetic"},
        "prompt": {"user_template": "{persona}" * 2000},
    }
    with shared_manager.api() as api:
        answer = api.post("/api/simulations", json=config)
        assert answer.status_code == 422, answer.text
        (error,) = answer.json()["detail"]
        assert error["loc"][-2:] == ["prompt", "user_template"]
        assert "characters, over the limit of 100,000" in error["msg"]
        assert api.get("/api/simulations").json()["items"] == []
