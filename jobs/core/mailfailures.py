"""What a mail server's refusal or silence means for an alert: whether to try
again, and the reply to show. The outbox (jobs.engine.outbox) judges each
send by it; the Settings page's "Send test" shows the same words."""

import smtplib
import socket

from django.conf import settings

REPLY_CHARS = 2000  # of a server's reply kept with the alert


def describe_failure(exc: BaseException) -> tuple[bool, str]:
    """(permanent?, what to show): a 5xx reply is permanent; a 4xx reply, a
    refused or dropped connection or a timeout is worth another try."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        replies = {rcpt: (code, reply_text(msg)) for rcpt, (code, msg) in exc.recipients.items()}
        text = "; ".join(f"{rcpt}: {code} {msg}" for rcpt, (code, msg) in replies.items())
        permanent = bool(replies) and all(500 <= code < 600 for code, _ in replies.values())
        return permanent, f"recipients refused: {text}"[:REPLY_CHARS]
    if isinstance(exc, smtplib.SMTPResponseException):
        return 500 <= exc.smtp_code < 600, f"{exc.smtp_code} {reply_text(exc.smtp_error)}"[:REPLY_CHARS]
    if _timed_out(exc):
        return False, f"timed out: the mail server did not answer within {settings.EMAIL_TIMEOUT} s"
    return False, f"{type(exc).__name__}: {exc}"[:REPLY_CHARS]


def _timed_out(exc: BaseException | None) -> bool:
    # smtplib reports a reply that never came as SMTPServerDisconnected,
    # raised while handling the socket's timeout.
    while exc is not None:
        if isinstance(exc, (TimeoutError, socket.timeout)):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def reply_text(value) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
