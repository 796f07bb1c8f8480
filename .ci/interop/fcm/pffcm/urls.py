from django.urls import include, path
from fcm_django.api.rest_framework import FCMDeviceAuthorizedViewSet
from rest_framework.routers import DefaultRouter
from rest_framework_simplejwt.views import TokenObtainPairView

from . import views

router = DefaultRouter()
router.register(r"devices", FCMDeviceAuthorizedViewSet)

urlpatterns = [
    path("api/token/", TokenObtainPairView.as_view()),
    path("accounts/login/", views.session_login),
    path("push/", views.push),
    path("content/<int:pk>/", views.content),
    path("", include(router.urls)),
]
