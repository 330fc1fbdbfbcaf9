"""Throw-away TLS material generated at test time (nothing is checked in).

:func:`make_tls_files` writes a private CA, a server certificate for ``127.0.0.1``
(IP SAN, so hostname checking works against the loopback address), a client
certificate signed by the same CA, and a second client certificate signed by an
unrelated CA (for "untrusted client" cases). Keys are EC P-256: fast to generate and
accepted by both Go's crypto/tls and Python's ssl module.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["TLSFiles", "encrypted_key", "make_tls_files"]


@dataclass(frozen=True)
class TLSFiles:
    """Paths of the generated PEM files."""

    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    #: A client certificate from a CA the server does not trust.
    rogue_client_cert: Path
    rogue_client_key: Path
    #: The common name in ``client_cert``.
    client_common_name: str = "nsqctl-test-client"


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "nsqctl tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _validity(builder: x509.CertificateBuilder) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return builder.not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(
        now + datetime.timedelta(days=2)
    )


def _make_ca(common_name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    name = _name(common_name)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        _validity(x509.CertificateBuilder())
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _make_leaf(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    common_name: str,
    *,
    server: bool,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    builder = (
        _validity(x509.CertificateBuilder())
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    return builder.sign(ca_key, hashes.SHA256()), key


def _write_cert(path: Path, cert: x509.Certificate) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    return path


def encrypted_key(key_file: Path, passphrase: bytes, out: Path) -> Path:
    """``key_file``'s key written to ``out`` encrypted with ``passphrase`` (PKCS#8 PEM,
    as ``openssl pkcs8 -topk8 -v2 aes256`` writes it)."""
    key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    out.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(passphrase),
        )
    )
    out.chmod(0o600)
    return out


def make_tls_files(directory: Path) -> TLSFiles:
    """Generate a CA, a 127.0.0.1 server cert and client certs under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = _make_ca("nsqctl test CA")
    server_cert, server_key = _make_leaf(ca_cert, ca_key, "127.0.0.1", server=True)
    client_cn = TLSFiles.client_common_name
    client_cert, client_key = _make_leaf(ca_cert, ca_key, client_cn, server=False)
    rogue_ca, rogue_ca_key = _make_ca("some other CA")
    rogue_cert, rogue_key = _make_leaf(rogue_ca, rogue_ca_key, "rogue-client", server=False)
    return TLSFiles(
        ca_cert=_write_cert(directory / "ca.pem", ca_cert),
        server_cert=_write_cert(directory / "server.pem", server_cert),
        server_key=_write_key(directory / "server.key", server_key),
        client_cert=_write_cert(directory / "client.pem", client_cert),
        client_key=_write_key(directory / "client.key", client_key),
        rogue_client_cert=_write_cert(directory / "rogue-client.pem", rogue_cert),
        rogue_client_key=_write_key(directory / "rogue-client.key", rogue_key),
    )


def nsqd_tls_args(files: TLSFiles) -> list[str]:
    """nsqd flags (both families) for TLS with ``files``' server certificate and CA.

    An empty --https-address: no HTTPS listener (its default is 0.0.0.0:4152, shared by
    every TLS nsqd and not on loopback only).
    """
    return [
        "--https-address=",
        f"--tls-cert={files.server_cert}",
        f"--tls-key={files.server_key}",
        f"--tls-root-ca-file={files.ca_cert}",
    ]
