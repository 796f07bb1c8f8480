from django.urls import include, path
from push_notifications.api.rest_framework import WebPushDeviceAuthorizedViewSet, WNSDeviceAuthorizedViewSet
from rest_framework.authtoken.views import obtain_auth_token
from rest_framework.routers import DefaultRouter

from . import views

router = DefaultRouter()
router.register(r"device/wns", WNSDeviceAuthorizedViewSet)
router.register(r"device/wp", WebPushDeviceAuthorizedViewSet)

urlpatterns = [
    path("api-token-auth/", obtain_auth_token),
    path("notify/", views.notify),
    path("", include(router.urls)),
]
