"""What Django's debug page may show."""

import re

from django.views.debug import SafeExceptionReporterFilter


class SecretsHiddenFilter(SafeExceptionReporterFilter):
    """Django's filter, also hiding the URLs that carry database and broker passwords.

    The debug page lists settings and the request's environment, which under
    runserver includes every environment variable.
    """

    hidden_settings = re.compile(
        "API|AUTH|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE|DATABASE_URL|REDIS",
        flags=re.I,
    )
