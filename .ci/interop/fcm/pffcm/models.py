from django.conf import settings
from django.db import models


class SecureContent(models.Model):
    """What a secure push names by id: only its recipient may fetch it."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    payload = models.TextField()
