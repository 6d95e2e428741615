"""The `file` part of a multipart/form-data upload, found in the written body by its boundary:
binary-safe (CRLF and dashes in the content), the named part among others, clear errors."""

from __future__ import annotations

import httpx
import pytest

from backend.api.upload_body import BadMultipart, boundary_of, file_part


def written(tmp_path, files: dict, data: dict | None = None):
    request = httpx.Request("POST", "http://x/api/uploads", files=files, data=data)
    body = tmp_path / "body"
    body.write_bytes(request.read())
    return body, boundary_of(request.headers["content-type"])


def test_the_file_part_comes_back_byte_for_byte_whatever_it_holds(tmp_path):
    content = b"a,b\r\n--\r\n\r\n--not-the-boundary\r\n\x00\xff" * 1000
    body, boundary = written(tmp_path, {"file": ("dir/e.csv", content, "text/csv")})
    name, start, end = file_part(body, boundary)
    assert name == "e.csv" and body.read_bytes()[start:end] == content


def test_the_part_named_file_is_chosen_among_others(tmp_path):
    body, boundary = written(
        tmp_path, {"file": ("n.csv", b"id\n1\n", "text/csv")}, data={"note": "hello"}
    )
    name, start, end = file_part(body, boundary)
    assert (name, body.read_bytes()[start:end]) == ("n.csv", b"id\n1\n")


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"", "it is empty"),
        (b"no delimiter at all", "no part found"),
        (b"--b\r\nContent-Disposition: form-data; name=file\r\n\r\nnever ends", "never ends"),
        (
            b"--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--b\r\n"
            b"Content-Disposition: form-data; name=c\r\n\r\n2\r\n--b--\r\n",
            "the form's `file` part",
        ),
    ],
)
def test_a_broken_body_says_what_is_wrong(tmp_path, raw, words):
    body = tmp_path / "body"
    body.write_bytes(raw)
    with pytest.raises(BadMultipart, match=words):
        file_part(body, b"b")


def test_a_content_type_without_a_boundary_is_refused():
    with pytest.raises(BadMultipart, match="names no boundary"):
        boundary_of("multipart/form-data")
