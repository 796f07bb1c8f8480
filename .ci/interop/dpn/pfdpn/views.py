from django.contrib.auth import get_user_model
from push_notifications.models import WNSDevice
from rest_framework.decorators import api_view
from rest_framework.response import Response


@api_view(["POST"])
def notify(request):
    """Sends a toast to every active WNS device of the user named `to`, as an app's own view would."""
    to = request.data.get("to")
    message = request.data.get("message")
    if not isinstance(to, str) or not isinstance(message, str):
        return Response({"detail": "to and message are required"}, status=400)
    if not get_user_model().objects.filter(username=to).exists():
        return Response({"detail": "no such user"}, status=404)
    results = WNSDevice.objects.filter(user__username=to, active=True).send_message(message)
    return Response({"sent": len(results)})
