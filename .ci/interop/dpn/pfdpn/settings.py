# A Django site hosting django-push-notifications' own DRF device endpoints, DRF's token login,
# and the one view an app adds to send: the backend under test in the interop run. Everything
# it needs comes from the environment the interop script sets.
import os

BASE_DIR = os.environ["PFDPN_STATE"]
SECRET_KEY = "pushfleet-interop-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "rest_framework",
    "rest_framework.authtoken",
    "push_notifications",
]
MIDDLEWARE = []
ROOT_URLCONF = "pfdpn.urls"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.path.join(BASE_DIR, "db.sqlite3"), "OPTIONS": {"timeout": 30}}}
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
}
# WNS: devices hand the backend channel URLs on the mock push service; the OAuth step goes to the
# mock's token endpoint (login.live.com's /accesstoken.srf), whose tokens it then requires.
PUSH_NOTIFICATIONS_SETTINGS = {
    "WNS_PACKAGE_SECURITY_ID": "ms-app://pushfleet-interop",
    "WNS_SECRET_KEY": "pushfleet-interop",
    "WNS_ACCESS_URL": os.environ["PFDPN_WNS_ACCESS_URL"],
}
# Web Push (pywebpush): the VAPID private key browsers' subscriptions are bound to, when the run
# has browsers; the endpoints are the push services' own https hosts, reached by hosts entries.
if os.environ.get("PFDPN_WP_PRIVATE_KEY"):
    PUSH_NOTIFICATIONS_SETTINGS["WP_PRIVATE_KEY"] = os.environ["PFDPN_WP_PRIVATE_KEY"]
    PUSH_NOTIFICATIONS_SETTINGS["WP_CLAIMS"] = {"sub": "mailto:interop@pushfleet.invalid"}
LOGGING = {"version": 1, "disable_existing_loggers": False, "handlers": {}, "root": {"level": "ERROR"}}
# Test users only: a cheap hasher, so a fleet's logins measure the backend, not PBKDF2.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
