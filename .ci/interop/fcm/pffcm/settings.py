# A Django site hosting fcm-django's own DRF device endpoints, SimpleJWT's token login, and the
# views an app adds to send and to hand out stored content: the backend under test in the fcm-django
# interop run. firebase-admin reaches the mock push service through the hosts entry and CA bundle
# that .ci/interop/fcm/in-namespace.sh sets up.
import os

import firebase_admin
from firebase_admin import credentials

BASE_DIR = os.environ["PFFCM_STATE"]
SECRET_KEY = "pushfleet-interop-only-not-a-secret-0123456789"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.sessions",
    "rest_framework",
    "fcm_django",
    "pffcm",
]
# Session logins too (scenario-session.yaml): a session cookie and Django's CSRF check.
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
ROOT_URLCONF = "pffcm.urls"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.path.join(BASE_DIR, "db.sqlite3"), "OPTIONS": {"timeout": 30}}}
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework_simplejwt.authentication.JWTAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
}
# The service account is Google's JSON, its token_uri Google's: only the hosts entry moves it.
FIREBASE_APP = firebase_admin.initialize_app(credentials.Certificate(os.environ["PFFCM_SERVICE_ACCOUNT"]))
FCM_DJANGO_SETTINGS = {"DEFAULT_FIREBASE_APP": FIREBASE_APP, "DELETE_INACTIVE_DEVICES": False}
LOGGING = {"version": 1, "disable_existing_loggers": False, "handlers": {}, "root": {"level": "ERROR"}}
# Test users only: a cheap hasher, so a fleet's logins measure the backend, not PBKDF2.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
