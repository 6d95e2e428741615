"""An interview's statuses: a question to an agent, answered or failed."""

from __future__ import annotations

from typing import Literal, get_args

from backend.lifecycles import machine

InterviewStatus = Literal["answering", "answered", "failed"]
INTERVIEW_STATUSES: tuple[str, ...] = get_args(InterviewStatus)
ANSWERING: InterviewStatus = "answering"
ANSWERED: InterviewStatus = "answered"
FAILED: InterviewStatus = "failed"

FINAL: tuple[str, ...] = (ANSWERED, FAILED)
TRANSITIONS: dict[str, tuple[str, ...]] = {ANSWERING: FINAL, ANSWERED: (), FAILED: ()}
MACHINE = machine("interview", INTERVIEW_STATUSES, TRANSITIONS, final=FINAL, initial=(ANSWERING,))
check_transition = MACHINE.check
