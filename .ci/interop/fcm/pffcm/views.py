from django.contrib.auth import authenticate, get_user_model, login
from django.http import HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.views.decorators.csrf import csrf_exempt
from fcm_django.models import FCMDevice
from firebase_admin.messaging import Message, Notification
from rest_framework.decorators import api_view
from rest_framework.response import Response

from .models import SecureContent


@api_view(["POST"])
def push(request):
    """Sends to every active device of the user named `to`, as an app's own view would: a
    notification for `plain`, and for `secure` a data-only push naming content stored for them."""
    to, kind, text = request.data.get("to"), request.data.get("kind", "plain"), request.data.get("text")
    if not isinstance(to, str) or not isinstance(text, str) or kind not in ("plain", "secure"):
        return Response({"detail": "to, text and kind (plain or secure) are required"}, status=400)
    user = get_user_model().objects.filter(username=to).first()
    if user is None:
        return Response({"detail": "no such user"}, status=404)
    devices = FCMDevice.objects.filter(user=user, active=True)
    answer = {}
    if kind == "plain":
        message = Message(notification=Notification(title="pushfleet", body=text), data={"kind": "plain"})
    else:
        content = SecureContent.objects.create(owner=user, payload=text)
        message = Message(data={"kind": "secure", "content_id": str(content.pk)})
        answer["id"] = content.pk
    result = devices.send_message(message)
    answer["sent"] = len(result.registration_ids_sent)
    answer["deactivated"] = len(result.deactivated_registration_ids)
    return Response(answer, status=202)


@api_view(["GET"])
def content(request, pk):
    found = SecureContent.objects.filter(pk=pk, owner=request.user).first()
    if found is None:
        return Response({"detail": "not found"}, status=404)
    return Response({"payload": found.payload})


@csrf_exempt
def session_login(request):
    """A form login that starts a session, as a web or hybrid app's would: 204 with the session
    cookie and the CSRF cookie that later unsafe requests must echo in X-CSRFToken."""
    if request.method != "POST":
        return JsonResponse({"detail": "POST only"}, status=405)
    user = authenticate(request, username=request.POST.get("username"), password=request.POST.get("password"))
    if user is None:
        return JsonResponse({"detail": "wrong credentials"}, status=401)
    login(request, user)
    get_token(request)
    return HttpResponse(status=204)
