"""Real providers are reached over HTTPS: our transport's TLS path against a local TLS server.

The certificate is made for this test with Debian's openssl; nothing leaves 127.0.0.1.
"""

import asyncio
import shutil
import ssl
import subprocess

import pytest

from runs.engine.providers import Router, settings_from_env
from runs.engine.providers.transport import PooledTransport
from runs.engine.types import ChatRequest
from tests.fakes.llm_server import FakeLLMServer


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make a test certificate (Debian package openssl)")
    folder = tmp_path_factory.mktemp("tls")
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return key, cert


@pytest.fixture(scope="module")
def tls_server(certificate):
    key, cert = certificate
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server = FakeLLMServer(ssl_context=context)
    server.start_in_thread()
    yield server
    server.stop_in_thread()


def ask(server, transport, n=1):
    settings = settings_from_env({"OPENAI_BASE_URL": server.base_url + "/v1", "OPENAI_API_KEY": "sk-test"},
                                 max_attempts=1)

    async def main():
        async with Router(settings, transport=transport) as router:
            return [await router.complete(ChatRequest(model_id="openai:tls-model",
                                                      messages=({"role": "user", "content": f"hello {i}"},)))
                    for i in range(n)]

    return asyncio.run(main())


def test_a_call_over_https_to_a_trusted_certificate_works_and_reuses_its_connection(tls_server, certificate):
    assert tls_server.base_url.startswith("https://")
    trusted = ssl.create_default_context(cafile=str(certificate[1]))
    results = ask(tls_server, PooledTransport(ssl_context=trusted), n=3)
    assert [r.text for r in results] == ["Echo: hello 0", "Echo: hello 1", "Echo: hello 2"]
    assert all(r.error is None for r in results)


def test_an_untrusted_certificate_is_an_error_on_the_item_never_an_answer(tls_server):
    (result,) = ask(tls_server, PooledTransport())  # the system's trust store does not know our certificate
    assert result.text is None and result.error
    assert "certificate" in result.error.lower() or "ssl" in result.error.lower()
