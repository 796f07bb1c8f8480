from django.contrib.auth import get_user_model
from push_notifications.models import WebPushDevice, WNSDevice
from rest_framework.decorators import api_view
from rest_framework.response import Response


@api_view(["POST"])
def notify(request):
    """Sends `message` to every active WNS and Web Push device of the user named `to`, as an app's
    own view would: a toast to each WNS channel, the text as each browser's encrypted payload."""
    to = request.data.get("to")
    message = request.data.get("message")
    if not isinstance(to, str) or not isinstance(message, str):
        return Response({"detail": "to and message are required"}, status=400)
    if not get_user_model().objects.filter(username=to).exists():
        return Response({"detail": "no such user"}, status=404)
    results = WNSDevice.objects.filter(user__username=to, active=True).send_message(message)
    results += WebPushDevice.objects.filter(user__username=to, active=True).send_message(message)
    return Response({"sent": len(results)})
